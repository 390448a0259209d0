// A temporary directory for unit tests: made empty on construction, removed with everything in it
// on destruction. Its name holds the process id and a counter, so tests running in parallel
// (ctest -j) never share one.
#ifndef KWATT_SRC_TESTING_TEMP_DIR_H_
#define KWATT_SRC_TESTING_TEMP_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <string>

namespace kwatt::testing {

class TempDir {
 public:
  // Below `base` when given (a tmpfs for tests that write thousands of small files: ShmBase()),
  // else below the temporary directory.
  explicit TempDir(const std::string& prefix = "kwatt_test",
                   const std::filesystem::path& base = {}) {
    static int counter = 0;
    root_ = (base.empty() ? std::filesystem::temp_directory_path() : base) /
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

// /dev/shm (tmpfs) where there is one, else the temporary directory: ext4 makes creating and
// replacing thousands of small files slow (inode allocation), tmpfs does not.
inline std::filesystem::path ShmBase() {
  std::error_code error;
  return std::filesystem::is_directory("/dev/shm", error) ? std::filesystem::path("/dev/shm")
                                                          : std::filesystem::temp_directory_path();
}

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_TEMP_DIR_H_
