// ArchiveReader: one file after the other, one frame at a time, in bounded memory; a file's hash
// checked in a first pass so that a damaged file gives no row.
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kwatt/archive/reader.h"
#include "src/archive/read_internal.h"

namespace kwatt::archive {

namespace fs = std::filesystem;
using internal::AppendFiltered;
using internal::CheckFrame;
using internal::CheckTally;
using internal::Damaged;
using internal::Errno;
using internal::FileTally;
using internal::FrameDecoder;
using internal::FrameSpan;
using internal::FrameWhere;
using internal::Hex64;
using internal::kReadChunk;
using internal::OpenDataFile;
using internal::ReadExactly;
using internal::Select;
using internal::Selection;

namespace {

// Reads a data file frame by frame through a buffer that grows to hold the largest frame.
class FrameFileReader {
 public:
  ~FrameFileReader() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads [0, limit) of the open file `fd` (taken over).
  void Start(int fd, int64_t limit, std::string path) {
    Close();
    fd_ = fd;
    limit_ = limit;
    path_ = std::move(path);
    read_ = 0;
    pos_ = end_ = 0;
    buffer_offset_ = 0;
    frames_ = 0;
    if (buffer_.size() < kReadChunk) buffer_.resize(kReadChunk);
  }

  // The next whole frame; *done at the end of the part to read.
  Status Next(std::string_view* frame, FrameSpan* span, bool* done, const std::string& rel) {
    *done = false;
    while (true) {
      size_t avail = end_ - pos_;
      bool eof = read_ == limit_;
      if (avail == 0 && eof) {
        *done = true;
        return Status::OK();
      }
      if (avail > 0) {
        bool need_more = false;
        size_t offset = buffer_offset_ + pos_;
        KWATT_RETURN_IF_ERROR(CheckFrame(buffer_.data() + pos_, avail, eof, &span->size,
                                         &span->content_size, &need_more,
                                         FrameWhere(rel, frames_, offset)));
        if (!need_more) {
          span->offset = offset;
          *frame = std::string_view(buffer_.data() + pos_, span->size);
          pos_ += span->size;
          ++frames_;
          return Status::OK();
        }
      }
      // Read more: keep the frame in progress at the start of the buffer, grow it if full.
      if (pos_ > 0) {
        std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
        buffer_offset_ += pos_;
        end_ -= pos_;
        pos_ = 0;
      }
      if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);
      size_t want = size_t(std::min<int64_t>(int64_t(buffer_.size() - end_), limit_ - read_));
      ssize_t n;
      do {
        n = ::read(fd_, buffer_.data() + end_, want);
      } while (n < 0 && errno == EINTR);
      if (n < 0) return Status::IOError("cannot read " + path_ + ": " + Errno());
      if (n == 0) return Status::Corruption(rel + ": truncated while being read");
      end_ += size_t(n);
      read_ += n;
    }
  }

  int64_t frames() const { return frames_; }

 private:
  int fd_ = -1;
  int64_t limit_ = 0, read_ = 0;
  std::string path_;
  std::vector<char> buffer_;
  size_t pos_ = 0, end_ = 0;
  size_t buffer_offset_ = 0;  // file offset of buffer_[0]
  int64_t frames_ = 0;
};

}  // namespace

struct ArchiveReader::Impl {
  Manifest manifest;
  Selection selection;
  StringInterner interner;
  std::vector<uint32_t> metric_ids;
  FrameDecoder decoder;
  FrameFileReader reader;
  RowBatch scratch;
  std::vector<int64_t> metric_counts;
  FileTally tally;
  size_t next_file = 0;       // the next file to open
  size_t current = SIZE_MAX;  // the file being read (or last read)
  bool file_open = false;
  Status status;
  bool ended = false;
  int64_t rows = 0;

  Status OpenNextFile() {
    const ManifestFile& f = selection.files[next_file];
    current = next_file++;
    int fd;
    int64_t size;
    Status status = OpenDataFile(manifest.dir, f, manifest.complete, &fd, &size);
    if (!status.ok()) {
      return status.code() == Status::Code::kCorruption ? Damaged(manifest.dir, status.message())
                                                        : status;
    }
    std::string path = (fs::path(manifest.dir) / f.path).string();
    if (fd >= 0 && manifest.complete) {
      // First pass: the hash, so that a damaged file gives no row.
      XXH64_state_t* state = XXH64_createState();
      XXH64_reset(state, 0);
      std::vector<char> buffer(kReadChunk);
      int64_t offset = 0;
      while (offset < f.bytes) {
        size_t n = size_t(std::min<int64_t>(int64_t(buffer.size()), f.bytes - offset));
        status = ReadExactly(fd, buffer.data(), n, offset, path);
        if (!status.ok()) break;
        XXH64_update(state, buffer.data(), n);
        offset += int64_t(n);
      }
      std::string hash = Hex64(XXH64_digest(state));
      XXH64_freeState(state);
      if (status.ok() && hash != f.xxh64) {
        status =
            Damaged(manifest.dir, f.path + ": its XXH64 is " + hash + ", the manifest records " +
                                      f.xxh64 + " (its bytes changed)");
      }
      if (!status.ok()) {
        ::close(fd);
        return status;
      }
    }
    reader.Start(fd, fd < 0 ? 0 : f.bytes, path);  // fd -1: a missing file with nothing committed
    tally = FileTally();
    metric_counts.clear();
    file_open = true;
    return Status::OK();
  }

  Status EndFile() {
    file_open = false;
    reader.Close();
    const ManifestFile& f = selection.files[current];
    if (reader.frames() != f.frames) {
      return Damaged(manifest.dir, f.path + ": " + std::to_string(reader.frames()) +
                                       " zstd frames, the " +
                                       (manifest.complete ? "manifest" : "journal") + " records " +
                                       std::to_string(f.frames));
    }
    tally.AddCounts(&metric_counts, interner);
    std::vector<std::string> problems = CheckTally(f, tally, /*check_bounds=*/false);
    if (!problems.empty()) return Damaged(manifest.dir, problems.front());
    return Status::OK();
  }

  // Fills `batch` with the next rows; false at the end.
  Status Advance(RowBatch* batch, bool* got) {
    *got = false;
    const bool direct = !selection.filters_rows();
    while (true) {
      if (!file_open) {
        if (next_file == selection.files.size()) return Status::OK();
        KWATT_RETURN_IF_ERROR(OpenNextFile());
      }
      std::string_view frame;
      FrameSpan span;
      bool done;
      const ManifestFile& f = selection.files[current];
      Status status = reader.Next(&frame, &span, &done, f.path);
      if (!status.ok()) {
        return status.code() == Status::Code::kCorruption ? Damaged(manifest.dir, status.message())
                                                          : status;
      }
      if (done) {
        KWATT_RETURN_IF_ERROR(EndFile());
        continue;
      }
      RowBatch* target = direct ? batch : &scratch;
      target->Clear();
      status = decoder.Decode(frame, span.content_size, &interner, target,
                              FrameWhere(f.path, size_t(reader.frames() - 1), span.offset));
      if (!status.ok()) return Damaged(manifest.dir, status.message());
      tally.CountRows(*target, 0, &metric_counts);
      if (!direct) {
        batch->Clear();
        KWATT_RETURN_IF_ERROR(
            AppendFiltered(scratch, 0, metric_ids, selection, /*keep_raw=*/true, batch));
      }
      if (!batch->empty()) {
        rows += int64_t(batch->size());
        *got = true;
        return Status::OK();
      }
    }
  }
};

ArchiveReader::ArchiveReader() : impl_(std::make_unique<Impl>()) {}
ArchiveReader::~ArchiveReader() = default;

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::Open(const std::string& dir,
                                                           const LoadOptions& options) {
  Result<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  Result<Selection> selection = Select(*manifest, options);
  if (!selection.ok()) return selection.status();
  std::unique_ptr<ArchiveReader> reader(new ArchiveReader());
  Impl& impl = *reader->impl_;
  impl.manifest = std::move(*manifest);
  impl.selection = std::move(*selection);
  for (const std::string& metric : impl.selection.metrics) {
    impl.metric_ids.push_back(impl.interner.Intern(metric));
  }
  return reader;
}

const Manifest& ArchiveReader::manifest() const { return impl_->manifest; }
const std::vector<ManifestFile>& ArchiveReader::files() const { return impl_->selection.files; }

bool ArchiveReader::Next(RowBatch* batch) {
  Impl& impl = *impl_;
  if (impl.ended) return false;
  bool got = false;
  impl.status = impl.Advance(batch, &got);
  if (!impl.status.ok() || !got) {
    impl.ended = true;
    impl.reader.Close();
    batch->Clear();
    return false;
  }
  return true;
}

const ManifestFile& ArchiveReader::current_file() const {
  return impl_->selection.files.at(impl_->current);
}
const StringInterner& ArchiveReader::interner() const { return impl_->interner; }
const Status& ArchiveReader::status() const { return impl_->status; }
int64_t ArchiveReader::rows() const { return impl_->rows; }

}  // namespace kwatt::archive
