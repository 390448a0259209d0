// Shared pieces of kwatt's libFuzzer harnesses (fuzz/README.md).
#ifndef KWATT_FUZZ_FUZZ_UTIL_H_
#define KWATT_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace kwatt::fuzz {

// A directory of this process's own under /dev/shm (or the temporary directory), emptied before
// each input, for the harnesses whose parsers read files.
inline const std::filesystem::path& ScratchDir() {
  static const std::filesystem::path dir = [] {
    std::error_code error;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", error)
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("kwatt-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code e;
      std::filesystem::remove_all(ScratchDir(), e);
    });
    return d;
  }();
  return dir;
}

inline void WriteFile(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), std::streamsize(text.size()));
}

// Splits an input in two at its first occurrence of `separator` (the second part empty without).
inline std::pair<std::string_view, std::string_view> SplitInput(std::string_view input,
                                                                std::string_view separator) {
  size_t at = input.find(separator);
  if (at == std::string_view::npos) return {input, {}};
  return {input.substr(0, at), input.substr(at + separator.size())};
}

// Aborts (a finding) when `condition` is false: for properties a harness checks.
#define KWATT_FUZZ_CHECK(condition)                                                           \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

}  // namespace kwatt::fuzz

#endif  // KWATT_FUZZ_FUZZ_UTIL_H_
