// A file a command was asked to write (`kwatt export -o PATH`, `kwatt fetch -o PATH`).
//
// A regular file (new or existing, or a symbolic link to one) is written under a temporary name
// beside it and renamed over it once whole, so that an interrupted or failed write never leaves a
// shorter file that looks finished, and an existing file is kept until then. Anything else that
// exists (a device such as /dev/null, a FIFO, a terminal) is written through as it is: kwatt never
// replaces a file it was not asked to write. A directory, an empty path, or a path whose
// directory does not exist is refused.
//
// Thread safety: an OutputFile belongs to one thread.
#ifndef KWATT_CORE_OUTPUT_FILE_H_
#define KWATT_CORE_OUTPUT_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt {

class OutputFile {
 public:
  // Decides how `path` is written. InvalidArgument for "" or a directory (naming it), or for a
  // path that is one of `inputs` or lies inside one of them (files and directories the command
  // reads: an output is never written into its input, `export ARCHIVE -o ARCHIVE/manifest.json`);
  // IOError when its directory cannot be written to.
  static Result<OutputFile> Plan(const std::string& path,
                                 const std::vector<std::string>& inputs = {});

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Removes the temporary file unless Commit() succeeded.
  ~OutputFile();

  // The path to open and write: a temporary name beside the target, or the target itself when it
  // is written through.
  const std::string& write_path() const { return write_path_; }
  // The file that holds the result once committed (a link's target for a link).
  const std::string& target() const { return target_; }
  // True when the target is replaced on Commit(); false when written through.
  bool replaces() const { return replaces_; }

  // Once the content is whole and closed: renames the temporary file over the target. IOError
  // naming both paths when the rename fails (the temporary file is then removed).
  Status Commit();
  // Removes the temporary file (nothing when written through). Commit() is then refused.
  void Abandon();

 private:
  OutputFile() = default;
  std::string target_, write_path_;
  bool replaces_ = false;
  bool done_ = false;
};

// Writes `content` as the whole of `path`, as an OutputFile does (a regular file is replaced only
// once whole: a reader sees the old content or the new, never a part). Errors as Plan's, and
// IOError naming the path when the write fails.
Status WriteWholeFile(const std::string& path, std::string_view content);

}  // namespace kwatt

#endif  // KWATT_CORE_OUTPUT_FILE_H_
