// Errors of the form "[op] argument: what is wrong"; the bindings map kinds to Python exceptions.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace swisk {

enum class ErrorKind { value, type, runtime };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, const char* op, const char* arg, const Args&... what) {
  throw Error(kind, detail::cat("[", op, "] ", arg, ": ", what...));
}

}  // namespace swisk

// SWISK_CHECK(cond, kind, op, arg, message parts...)
#define SWISK_CHECK(cond, kind, op, arg, ...) \
  do {                                        \
    if (!(cond)) ::swisk::fail(::swisk::ErrorKind::kind, op, arg, __VA_ARGS__); \
  } while (0)
