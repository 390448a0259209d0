#include "kwatt/core/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

namespace kwatt {

namespace fs = std::filesystem;

namespace {

// Whether `path` is `input` or lies under it, both resolved (links, "..", relative paths) as far
// as they exist.
bool Inside(const fs::path& path, const std::string& input) {
  std::error_code error;
  fs::path within = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) return false;
  fs::path outer = fs::weakly_canonical(fs::absolute(input, error), error);
  if (error) return false;
  auto [end, rest] = std::mismatch(outer.begin(), outer.end(), within.begin(), within.end());
  return end == outer.end();
}

}  // namespace

Result<OutputFile> OutputFile::Plan(const std::string& path,
                                    const std::vector<std::string>& inputs) {
  if (path.empty()) {
    return Status::InvalidArgument("the output file name is empty: give a path (or - for stdout)");
  }
  for (const std::string& input : inputs) {
    if (!input.empty() && Inside(path, input)) {
      return Status::InvalidArgument(path + " is inside " + input +
                                     ", which this command reads: an output is never written "
                                     "into its input; give a path outside it");
    }
  }
  OutputFile out;
  out.target_ = path;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {  // follows a link to what it names
    if (S_ISDIR(info.st_mode)) {
      return Status::InvalidArgument(path + " is a directory: give the path of a file to write");
    }
    if (!S_ISREG(info.st_mode)) {  // a device, a FIFO, a socket: written through, never replaced
      out.write_path_ = path;
      return out;
    }
    std::error_code error;
    fs::path resolved = fs::canonical(path, error);  // replace a link's target, not the link
    if (!error) out.target_ = resolved.string();
  } else if (errno != ENOENT) {
    return Status::IOError("cannot use " + path + ": " + std::strerror(errno));
  }
  fs::path directory = fs::path(out.target_).parent_path();
  if (directory.empty()) directory = ".";
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    return Status::IOError("cannot write " + path + ": its directory " + directory.string() +
                           " does not exist");
  }
  out.replaces_ = true;
  out.write_path_ = out.target_ + ".tmp-" + std::to_string(::getpid());
  return out;
}

OutputFile::OutputFile(OutputFile&& other) noexcept { *this = std::move(other); }

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    Abandon();
    target_ = std::move(other.target_);
    write_path_ = std::move(other.write_path_);
    replaces_ = other.replaces_;
    done_ = other.done_;
    other.done_ = true;  // the moved-from object owns no temporary file
    other.replaces_ = false;
  }
  return *this;
}

OutputFile::~OutputFile() { Abandon(); }

Status OutputFile::Commit() {
  if (done_) return Status::Internal("OutputFile::Commit after Commit or Abandon");
  done_ = true;
  if (!replaces_) return Status::OK();
  if (std::rename(write_path_.c_str(), target_.c_str()) != 0) {
    Status status = Status::IOError("cannot rename " + write_path_ + " to " + target_ + ": " +
                                    std::strerror(errno));
    std::remove(write_path_.c_str());
    return status;
  }
  return Status::OK();
}

void OutputFile::Abandon() {
  if (done_) return;
  done_ = true;
  if (replaces_) std::remove(write_path_.c_str());
}

Status WriteWholeFile(const std::string& path, std::string_view content) {
  KWATT_ASSIGN_OR_RETURN(OutputFile file, OutputFile::Plan(path));
  std::ofstream out(file.write_path(), std::ios::binary | std::ios::trunc);
  out.write(content.data(), std::streamsize(content.size()));
  out.close();
  if (!out) {
    return Status::IOError("cannot write " + path + ": " + std::strerror(errno));
  }
  return file.Commit();
}

}  // namespace kwatt
