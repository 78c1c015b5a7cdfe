// Test runner: --list prints test names; --run NAME runs one; no argument runs all.
#include <cstring>

#include "harness.h"

namespace swisk_test {
std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
int& failures() {
  static int f = 0;
  return f;
}
}  // namespace swisk_test

static bool run_one(const swisk_test::Case& c) {
  const int before = swisk_test::failures();
  try {
    c.fn();
  } catch (const swisk_test::AssertFailed&) {
  } catch (const std::exception& e) {
    swisk_test::report(c.name.c_str(), 0, std::string("unexpected exception: ") + e.what());
  }
  const bool ok = swisk_test::failures() == before;
  std::cout << (ok ? "[  OK  ] " : "[ FAIL ] ") << c.name << "\n";
  return ok;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--list") == 0) {
    for (const auto& c : swisk_test::cases()) std::cout << c.name << "\n";
    return 0;
  }
  if (argc > 2 && std::strcmp(argv[1], "--run") == 0) {
    for (const auto& c : swisk_test::cases())
      if (c.name == argv[2]) return run_one(c) ? 0 : 1;
    std::cerr << "no test named " << argv[2] << "\n";
    return 2;
  }
  int failed = 0;
  for (const auto& c : swisk_test::cases()) failed += run_one(c) ? 0 : 1;
  std::cout << swisk_test::cases().size() - failed << " passed, " << failed << " failed\n";
  return failed ? 1 : 0;
}
