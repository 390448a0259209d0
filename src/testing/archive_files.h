// Whole-file reads and writes for the archive's unit tests.
#ifndef KWATT_SRC_TESTING_ARCHIVE_FILES_H_
#define KWATT_SRC_TESTING_ARCHIVE_FILES_H_

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kwatt::archive::test_files {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace kwatt::archive::test_files

#endif  // KWATT_SRC_TESTING_ARCHIVE_FILES_H_
