// A temporary directory for unit tests: made empty on construction, removed with everything in it
// on destruction. Its name holds the process id and a counter, so tests running in parallel
// (ctest -j) never share one.
#ifndef KWATT_SRC_CORE_TEST_TEMP_DIR_H_
#define KWATT_SRC_CORE_TEST_TEMP_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <string>

namespace kwatt::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "kwatt_test") {
    static int counter = 0;
    root_ = std::filesystem::temp_directory_path() /
            (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

}  // namespace kwatt::testing

#endif  // KWATT_SRC_CORE_TEST_TEMP_DIR_H_
