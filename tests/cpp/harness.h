// A small gtest-style harness of our own: TEST(Suite, Name), EXPECT_* / ASSERT_*.
// The binary lists its tests (--list) and runs one (--run Suite.Name) so pytest collects each.
#pragma once

#include <cmath>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace swisk_test {

struct Case {
  std::string name;
  std::function<void()> fn;
};
std::vector<Case>& cases();
int& failures();

struct Register {
  Register(const char* suite, const char* name, std::function<void()> fn) {
    cases().push_back({std::string(suite) + "." + name, std::move(fn)});
  }
};
struct AssertFailed {};

inline void report(const char* file, int line, const std::string& what) {
  ++failures();
  std::cerr << file << ":" << line << ": failure: " << what << "\n";
}

}  // namespace swisk_test

#define TEST(suite, name)                                                                        \
  static void suite##_##name##_body();                                                           \
  static swisk_test::Register suite##_##name##_reg(#suite, #name, &suite##_##name##_body);       \
  static void suite##_##name##_body()

#define SWISK_T_CHECK(cond, fatal, msg)                                                          \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::ostringstream os_;                                                                    \
      os_ << msg;                                                                                \
      swisk_test::report(__FILE__, __LINE__, os_.str());                                         \
      if (fatal) throw swisk_test::AssertFailed{};                                               \
    }                                                                                            \
  } while (0)

#define EXPECT_TRUE(c) SWISK_T_CHECK((c), false, "expected true: " #c)
#define EXPECT_FALSE(c) SWISK_T_CHECK(!(c), false, "expected false: " #c)
#define EXPECT_EQ(a, b) SWISK_T_CHECK((a) == (b), false, #a " == " #b " (" << (a) << " vs " << (b) << ")")
#define EXPECT_NE(a, b) SWISK_T_CHECK((a) != (b), false, #a " != " #b " (both " << (a) << ")")
#define EXPECT_NEAR(a, b, tol)                                                                   \
  SWISK_T_CHECK(std::fabs(double(a) - double(b)) <= double(tol), false,                          \
                #a " ~ " #b " (" << (a) << " vs " << (b) << ", tol " << (tol) << ")")
#define ASSERT_TRUE(c) SWISK_T_CHECK((c), true, "expected true: " #c)
#define ASSERT_EQ(a, b) SWISK_T_CHECK((a) == (b), true, #a " == " #b " (" << (a) << " vs " << (b) << ")")
// EXPECT_THROW_MSG(stmt, ExceptionType, "substring of what()")
#define EXPECT_THROW_MSG(stmt, type, sub)                                                        \
  do {                                                                                           \
    bool caught_ = false;                                                                        \
    try {                                                                                        \
      stmt;                                                                                      \
    } catch (const type& e_) {                                                                   \
      caught_ = true;                                                                            \
      SWISK_T_CHECK(std::string(e_.what()).find(sub) != std::string::npos, false,                \
                    "message '" << e_.what() << "' lacks '" << sub << "'");                      \
    }                                                                                            \
    SWISK_T_CHECK(caught_, false, #stmt " did not throw " #type);                                \
  } while (0)
