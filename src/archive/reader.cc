#include "kwatt/archive/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "kwatt/archive/format.h"
#include "src/archive/frames.h"
#include "kwatt/kwollect/node_name.h"
#include "src/kwollect/row_parser.h"

// How an archive is read.
//
// A data file is a sequence of zstd frames, each holding whole rows (the format closes a frame
// just before a row), so frames can be decompressed independently. LoadArchive reads the selected
// files into memory in parallel (checking each one's size and XXH64) and splits them into frames
// (checking each header: a zstd frame, with its content size and a checksum). Helper threads then
// decompress the frames ahead, in order, into a ring of reused buffers (FramePipeline), while the
// calling thread parses each frame's text with the JSON Lines parser straight into the output
// table, reserved beforehand from the manifest's row counts and the frames' content sizes. So the
// table's memory is written once (on a VM, first-touching memory is what costs most), there is no
// merge, and ids come in row order whatever the thread count. zstd checks each frame's checksum
// and content size; each file's rows and rows per metric are checked once its frames are parsed.
// Measured on the 2-core VM (7.2 million wattmeter rows, 20 files, 34.6 MB): about 6 million rows
// per second into a table; decompression (about 2 GB/s of text on one core) keeps ahead of the
// parser (about 6.5 million rows/s), which is the limit. Parsing frames in parallel into per-thread
// tables and merging them was tried first: twice the memory written, and slower here.
//
// VerifyArchive decodes every frame of every file in parallel and keeps no row. ArchiveReader
// reads one frame at a time through a buffer that holds at least one whole frame; it hashes the
// file in a first pass so that a damaged file gives no row.

namespace kwatt::archive {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using internal::FrameDecoder;
using internal::FrameSpan;
using internal::FrameWhere;
using internal::SplitFrames;
using internal::CheckFrame;

namespace {

constexpr size_t kReadChunk = 1 << 20;       // bytes read from a file at a time (streaming)

std::string Hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string JoinList(const std::vector<std::string>& items, size_t max_items = 12) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > max_items) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out.empty() ? "none" : out;
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Choosing what to read.

namespace {

struct Selection {
  std::vector<ManifestFile> files;    // to read, in manifest order
  std::vector<std::string> metrics;   // to keep; empty: all
  std::optional<UnixNanos> start, end;
  bool filters_rows() const { return !metrics.empty() || start || end; }
};

std::string IncompleteMessage(const Manifest& m) {
  return m.dir + " is an incomplete archive: its backup stopped before the end (" +
         std::to_string(m.rows()) + " rows committed so far). Run the same `kwatt backup` " +
         "command again to complete it, or read what it holds so far with --allow-incomplete " +
         "(allow_incomplete in the API)";
}

Result<Selection> Select(const Manifest& m, const LoadOptions& options) {
  if (!m.complete && !options.allow_incomplete) return Status::Incomplete(IncompleteMessage(m));
  if (options.start && options.end && *options.start > *options.end) {
    return Status::InvalidArgument("the start (" + FormatUtcTimestamp(*options.start) +
                                   ") is after the end (" + FormatUtcTimestamp(*options.end) + ")");
  }
  Selection selection;
  selection.start = options.start;
  selection.end = options.end;

  // Nodes: their files, in manifest order.
  std::set<std::string> wanted_nodes;
  for (const std::string& text : options.nodes) {
    Result<kwollect::NodeName> name = kwollect::ParseNodeName(text);
    if (!name.ok()) return name.status();
    std::string fqdn = name->Fqdn();
    bool found = std::any_of(m.files.begin(), m.files.end(),
                             [&](const ManifestFile& f) { return f.node == fqdn; });
    if (!found) {
      std::vector<std::string> nodes;
      for (const ManifestFile& f : m.files) {
        if (!f.node.empty()) nodes.push_back(f.node);
      }
      return Status::NotFound("node " + fqdn + " is not in the archive " + m.dir +
                              " (its nodes: " + JoinList(nodes) + ")");
    }
    wanted_nodes.insert(fqdn);
  }

  // Metrics: each must be known to the archive (a typo must not read as "no rows").
  if (!options.metrics.empty()) {
    std::set<std::string> known(m.query.metrics.begin(), m.query.metrics.end());
    for (const ManifestFile& f : m.files) {
      for (const auto& [metric, rows] : f.metrics) known.insert(metric);
    }
    for (const auto& [cluster, text] : m.catalogue) {
      Json catalogue = Json::parse(text, nullptr, false);
      if (!catalogue.is_array()) continue;
      for (const Json& entry : catalogue) {
        if (entry.is_object() && entry.contains("name") && entry["name"].is_string()) {
          known.insert(entry["name"].get<std::string>());
        }
      }
    }
    for (const std::string& metric : options.metrics) {
      if (!known.count(metric)) {
        std::vector<std::string> names;
        for (const auto& [name, rows] : m.MetricRows()) names.push_back(name);
        return Status::NotFound("metric " + metric + " is not in the archive " + m.dir +
                                " (its metrics: " + JoinList(names) + ")");
      }
      if (std::find(selection.metrics.begin(), selection.metrics.end(), metric) ==
          selection.metrics.end()) {
        selection.metrics.push_back(metric);
      }
    }
  }

  for (const ManifestFile& f : m.files) {
    if (!wanted_nodes.empty() && !wanted_nodes.count(f.node)) continue;
    // Skip files that the manifest shows cannot match.
    if (!selection.metrics.empty() && !f.metrics.empty() &&
        std::none_of(f.metrics.begin(), f.metrics.end(), [&](const auto& entry) {
          return entry.second > 0 && std::find(selection.metrics.begin(), selection.metrics.end(),
                                               entry.first) != selection.metrics.end();
        })) {
      continue;
    }
    if (f.rows > 0 && !f.first.empty() && !f.last.empty()) {
      UnixNanos first = ParseIsoTimestamp(f.first)->utc, last = ParseIsoTimestamp(f.last)->utc;
      if ((selection.start && last < *selection.start) ||
          (selection.end && first > *selection.end)) {
        continue;
      }
    }
    selection.files.push_back(f);
  }
  return selection;
}

// ---------------------------------------------------------------------------------------------
// Files and frames.

// "archive DIR is damaged: data/x.jsonl.zst: <what> (...)".
Status Damaged(const std::string& dir, const std::string& problem) {
  return Status::Corruption("archive " + dir + " is damaged: " + problem +
                            " (`kwatt inspect --verify " + dir + "` lists every damage)");
}

Status TooMuchText(size_t bytes) {
  return Status::InvalidArgument(
      "the selected rows hold " + std::to_string(bytes >> 20) + " MiB of text, more than a " +
      "table holds (4 GiB): select fewer nodes or metrics, or a shorter window, or do not keep "
      "the rows' text");
}

// The rows of `src` from `from` on that pass the filters, appended to `dst` (same interner).
// `metric_ids`: the ids of the wanted metrics (empty: all). InvalidArgument if dst->raw would
// pass 4 GiB.
Status AppendFiltered(const RowBatch& src, size_t from, const std::vector<uint32_t>& metric_ids,
                      const Selection& selection, bool keep_raw, RowBatch* dst) {
  for (size_t i = from; i < src.size(); ++i) {
    if (selection.start && src.time[i] < *selection.start) continue;
    if (selection.end && src.time[i] > *selection.end) continue;
    if (!selection.metrics.empty() &&
        std::find(metric_ids.begin(), metric_ids.end(), src.metric[i]) == metric_ids.end()) {
      continue;
    }
    dst->time.push_back(src.time[i]);
    dst->utc_offset.push_back(src.utc_offset[i]);
    dst->device.push_back(src.device[i]);
    dst->metric.push_back(src.metric[i]);
    dst->value.push_back(src.value[i]);
    dst->labels.push_back(src.labels[i]);
    if (keep_raw) {
      std::string_view row = src.RawRow(i);
      if (dst->raw.size() + row.size() > UINT32_MAX) return TooMuchText(dst->raw.size());
      dst->raw.append(row);
      dst->raw_end.push_back(uint32_t(dst->raw.size()));
    }
  }
  return Status::OK();
}

// What was read of one file, for the per-file checks.
struct FileTally {
  int64_t rows = 0;
  std::map<std::string, int64_t> metrics;
  std::optional<UnixNanos> first, last;  // instants of its first and last rows

  // Counts rows [from, size) of `batch`; `by_id` counts rows per metric id (grown as needed).
  void CountRows(const RowBatch& batch, size_t from, std::vector<int64_t>* by_id) {
    if (from >= batch.size()) return;
    if (!first) first = batch.time[from];
    last = batch.time.back();
    rows += int64_t(batch.size() - from);
    for (size_t i = from; i < batch.size(); ++i) {
      uint32_t id = batch.metric[i];
      if (id >= by_id->size()) by_id->resize(id + 1, 0);
      ++(*by_id)[id];
    }
  }
  void AddCounts(std::vector<int64_t>* by_id, const StringInterner& interner) {
    for (size_t id = 0; id < by_id->size(); ++id) {
      if ((*by_id)[id] > 0) metrics[std::string(interner.Get(uint32_t(id)))] += (*by_id)[id];
    }
    by_id->clear();
  }
};

// The problems of a file whose rows were all read: rows, rows per metric, first and last.
std::vector<std::string> CheckTally(const ManifestFile& file, const FileTally& tally,
                                    bool check_bounds) {
  std::vector<std::string> problems;
  if (tally.rows != file.rows) {
    problems.push_back(file.path + ": holds " + std::to_string(tally.rows) + " rows, the " +
                       "manifest records " + std::to_string(file.rows));
  }
  if (!file.metrics.empty() || file.rows == 0) {
    std::map<std::string, int64_t> recorded(file.metrics.begin(), file.metrics.end());
    std::set<std::string> names;
    for (const auto& [name, rows] : recorded) names.insert(name);
    for (const auto& [name, rows] : tally.metrics) names.insert(name);
    for (const std::string& name : names) {
      int64_t have = tally.metrics.count(name) ? tally.metrics.at(name) : 0;
      int64_t want = recorded.count(name) ? recorded.at(name) : 0;
      if (have != want) {
        problems.push_back(file.path + ": holds " + std::to_string(have) + " rows of " + name +
                           ", the manifest records " + std::to_string(want));
      }
    }
  }
  if (check_bounds) {
    for (auto [text, instant, name] : {std::tuple{&file.first, &tally.first, "first"},
                                       std::tuple{&file.last, &tally.last, "last"}}) {
      if (text->empty() || !instant->has_value()) continue;
      Result<ParsedTime> recorded = ParseIsoTimestamp(*text);
      if (recorded.ok() && recorded->utc != **instant) {
        problems.push_back(file.path + ": its " + std::string(name) + " row is at " +
                           FormatParisTimestamp(**instant) + ", the manifest records " + *text);
      }
    }
  }
  return problems;
}

// Opens a data file and checks its size against what the manifest (or journal) records. Sets
// *fd (-1 for a missing file that should be empty).
Status OpenDataFile(const std::string& dir, const ManifestFile& file, bool complete, int* fd,
                    int64_t* size) {
  *fd = -1;
  *size = 0;
  fs::path path = fs::path(dir) / file.path;
  int handle = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (handle < 0) {
    if (errno == ENOENT) {
      if (!complete && file.bytes == 0) return Status::OK();
      return Status::Corruption(file.path + ": missing (the manifest records " +
                                std::to_string(file.rows) + " rows in it)");
    }
    return Status::IOError("cannot open " + path.string() + ": " + Errno());
  }
  struct stat info;
  if (::fstat(handle, &info) != 0) {
    Status status = Status::IOError("cannot read " + path.string() + ": " + Errno());
    ::close(handle);
    return status;
  }
  *size = int64_t(info.st_size);
  if (*size < file.bytes) {
    ::close(handle);
    return Status::Corruption(file.path + ": truncated: " + std::to_string(*size) + " bytes, the " +
                              (complete ? "manifest" : "journal") + " records " +
                              std::to_string(file.bytes));
  }
  if (complete && *size > file.bytes) {
    ::close(handle);
    return Status::Corruption(file.path + ": " + std::to_string(*size) + " bytes, the manifest " +
                              "records " + std::to_string(file.bytes) + " (bytes were added)");
  }
  *fd = handle;
  return Status::OK();
}

Status ReadExactly(int fd, char* data, size_t size, int64_t offset, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::pread(fd, data, size, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError("cannot read " + path + ": " + Errno());
    if (n == 0) return Status::Corruption(path + ": truncated while being read");
    data += n;
    size -= size_t(n);
    offset += n;
  }
  return Status::OK();
}

// Runs task(i, worker) for i in [0, n) on up to `threads` threads, claiming tasks in order; once
// a task returns false, no further task is claimed (those claimed before it still complete).
void ParallelFor(size_t n, int threads, const std::function<bool(size_t, int)>& task) {
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&](int worker) {
    while (!stop.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1);
      if (i >= n) break;
      if (!task(i, worker)) stop = true;
    }
  };
  int count = std::max(1, std::min<int>(threads, int(n)));
  if (count == 1) {
    work(0);
    return;
  }
  std::vector<std::thread> pool;
  for (int w = 1; w < count; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
}

int ThreadCount(int asked) {
  if (asked > 0) return asked;
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : int(hardware);
}

// ---------------------------------------------------------------------------------------------
// The parallel engine: LoadArchive and VerifyArchive.

struct FileWork {
  const ManifestFile* file = nullptr;
  std::unique_ptr<char[]> data;  // the bytes read (the committed part when incomplete)
  size_t size = 0;
  std::vector<FrameSpan> frames;
  bool framed = false;                // read, and split into frames
  Status io_error;                    // the file could not be read (not a damage)
  std::vector<std::string> problems;  // damage found (verify: all of it; load: the first)
  FileTally tally;
};

// Asks for transparent huge pages over the reserved capacity of a large buffer: far fewer page
// faults when gigabytes of rows are written to fresh memory. Harmless if unsupported.
void AdviseHugePages(const void* data, size_t bytes) {
  constexpr uintptr_t kHuge = 2 << 20;
  auto begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  auto end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

template <typename T>
void ReserveLarge(std::vector<T>* v, size_t n) {
  v->reserve(n);
  AdviseHugePages(v->data(), v->capacity() * sizeof(T));
}

void ReserveBatch(RowBatch* b, size_t rows, size_t raw, bool keep_raw) {
  ReserveLarge(&b->time, rows);
  ReserveLarge(&b->utc_offset, rows);
  ReserveLarge(&b->device, rows);
  ReserveLarge(&b->metric, rows);
  ReserveLarge(&b->value, rows);
  ReserveLarge(&b->labels, rows);
  if (keep_raw) {
    ReserveLarge(&b->raw_end, rows);
    b->raw.reserve(raw);
    AdviseHugePages(b->raw.data(), b->raw.capacity());
  }
}

// Puts a batch back to its sizes before a load.
void Truncate(RowBatch* b, size_t rows, size_t raw, size_t raw_ends) {
  b->time.resize(rows);
  b->utc_offset.resize(rows);
  b->device.resize(rows);
  b->metric.resize(rows);
  b->value.resize(rows);
  b->labels.resize(rows);
  b->raw_end.resize(raw_ends);
  b->raw.resize(raw);
}

// Phase 1 for one file: read it, check its size and hash, split it into frames.
void ReadAndSplit(const Manifest& m, bool verify, FileWork* w) {
  const ManifestFile& f = *w->file;
  int fd;
  int64_t size;
  Status status = OpenDataFile(m.dir, f, m.complete, &fd, &size);
  if (status.ok() && fd >= 0) {
    w->size = size_t(f.bytes);  // incomplete: the committed part only
    w->data.reset(new char[std::max<size_t>(w->size, 1)]);
    status = ReadExactly(fd, w->data.get(), w->size, 0, (fs::path(m.dir) / f.path).string());
    ::close(fd);
  }
  if (status.ok() && m.complete) {
    std::string hash = Hex64(XXH64(w->data.get(), w->size, 0));
    if (hash != f.xxh64) {
      w->problems.push_back(f.path + ": its XXH64 is " + hash + ", the manifest records " +
                            f.xxh64 + " (its bytes changed)");
      return;  // its frames are not decoded: nothing in a changed file is trusted
    }
  }
  if (status.ok()) {
    status = SplitFrames(f.path, std::string_view(w->data.get(), w->size), &w->frames);
  }
  if (status.ok() && int64_t(w->frames.size()) != f.frames) {
    status = Status::Corruption(f.path + ": " + std::to_string(w->frames.size()) +
                                " zstd frames, the " + (m.complete ? "manifest" : "journal") +
                                " records " + std::to_string(f.frames));
  }
  if (status.ok()) {
    w->framed = true;
  } else if (status.code() == Status::Code::kCorruption) {
    w->problems.push_back(status.message());
    w->frames.clear();
  } else {
    w->io_error = status;
    w->frames.clear();
  }
}

// Phase 1 over every selected file, in parallel. Returns the first I/O error, or (not verifying)
// the first damage, in file order.
Status ReadFiles(const Manifest& m, const Selection& selection, int threads, bool verify,
                 std::vector<FileWork>* works) {
  works->resize(selection.files.size());
  for (size_t i = 0; i < works->size(); ++i) (*works)[i].file = &selection.files[i];
  ParallelFor(works->size(), threads, [&](size_t i, int) {
    FileWork& w = (*works)[i];
    ReadAndSplit(m, verify, &w);
    return w.io_error.ok() && (verify || w.problems.empty());
  });
  for (const FileWork& w : *works) {
    if (!w.io_error.ok()) return w.io_error;
    if (!w.problems.empty() && !verify) return Damaged(m.dir, w.problems.front());
  }
  return Status::OK();
}

// Frames decompressed ahead by helper threads, in order, into a ring of reused buffers, while
// the caller parses them one after the other: the rows then go straight into the output, in
// order, interned once.
class FramePipeline {
 public:
  struct Frame {
    const FileWork* work;
    size_t index;  // in its file
  };

  FramePipeline(std::vector<Frame> frames, int helpers)
      : frames_(std::move(frames)), slots_(size_t(std::max(1, helpers)) * 2 + 2) {
    for (int k = 0; k < helpers; ++k) threads_.emplace_back([this] { Run(); });
  }
  ~FramePipeline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // The text of frame i (in order: i = 0, 1, 2...), valid until the next call.
  Status Get(size_t i, std::string_view* text) {
    if (threads_.empty()) {  // no helper: decompress here
      const Frame& f = frames_[i];
      const FrameSpan& span = f.work->frames[f.index];
      return inline_decoder_.Decompress(
          std::string_view(f.work->data.get() + span.offset, span.size), span.content_size,
          FrameWhere(f.work->file->path, f.index, span.offset), text);
    }
    Slot& slot = slots_[i % slots_.size()];
    std::unique_lock<std::mutex> lock(mutex_);
    consumed_ = i;  // frames before i are done with: their slots may be reused
    changed_.notify_all();
    changed_.wait(lock, [&] { return slot.frame == i; });
    *text = slot.text;
    return slot.status;
  }

 private:
  struct Slot {
    size_t frame = SIZE_MAX;  // the frame whose text it holds
    std::string_view text;
    Status status;
  };

  void Run() {
    while (true) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] {
          return stop_ || next_ >= frames_.size() || next_ < consumed_ + slots_.size();
        });
        if (stop_ || next_ >= frames_.size()) return;
        i = next_++;
      }
      Slot& slot = slots_[i % slots_.size()];
      FrameDecoder& slot_decoder = SlotDecoder(i % slots_.size());
      const Frame& f = frames_[i];
      const FrameSpan& span = f.work->frames[f.index];
      std::string_view text;
      Status status = slot_decoder.Decompress(
          std::string_view(f.work->data.get() + span.offset, span.size), span.content_size,
          FrameWhere(f.work->file->path, f.index, span.offset), &text);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        slot.text = text;
        slot.status = std::move(status);
        slot.frame = i;
      }
      changed_.notify_all();
    }
  }

  // The decoder that owns slot k's buffer (created on first use).
  FrameDecoder& SlotDecoder(size_t k) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (slot_decoders_.size() < slots_.size()) slot_decoders_.resize(slots_.size());
    if (!slot_decoders_[k]) slot_decoders_[k] = std::make_unique<FrameDecoder>();
    return *slot_decoders_[k];
  }

  std::vector<Frame> frames_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<FrameDecoder>> slot_decoders_;
  FrameDecoder inline_decoder_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t next_ = 0;      // the next frame to decompress
  size_t consumed_ = 0;  // frames before it are parsed
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

Status LoadArchive(const std::string& dir, const LoadOptions& options, StringInterner* interner,
                   RowBatch* out, LoadReport* report) {
  Result<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  Result<Selection> selection = Select(*manifest, options);
  if (!selection.ok()) return selection.status();
  const Selection& sel = *selection;
  const int threads = ThreadCount(options.threads);
  std::vector<FileWork> works;
  KWATT_RETURN_IF_ERROR(ReadFiles(*manifest, sel, threads, /*verify=*/false, &works));

  std::vector<FramePipeline::Frame> frames;
  size_t expected_rows = 0, text_bytes = 0;
  for (const FileWork& w : works) {
    expected_rows += size_t(w.file->rows);
    for (size_t k = 0; k < w.frames.size(); ++k) {
      frames.push_back({&w, k});
      text_bytes += w.frames[k].content_size;
    }
  }
  const size_t base_rows = out->size(), base_raw = out->raw.size();
  const size_t base_raw_end = out->raw_end.size();
  // Without filters every row of the files read is kept, and parsed straight into the table.
  const bool direct = !sel.filters_rows();
  if (direct) {
    // Each row is followed by '\n' in the text: the table needs the text minus a byte per row.
    size_t raw = text_bytes > expected_rows ? text_bytes - expected_rows : text_bytes;
    if (options.keep_raw && base_raw + raw > UINT32_MAX) return TooMuchText(raw);
    // Only an optimisation: the counts come from the manifest and the frame headers, which a
    // damaged archive may inflate (what they announce is checked when the frames are decoded).
    // A row takes more than 32 bytes of text.
    try {
      ReserveBatch(out, base_rows + std::min(expected_rows, text_bytes / 32), base_raw + raw,
                   options.keep_raw);
    } catch (const std::exception&) {  // std::bad_alloc, std::length_error
    }
  }
  std::vector<uint32_t> metric_ids;
  for (const std::string& metric : sel.metrics) metric_ids.push_back(interner->Intern(metric));

  LoadReport local;
  local.complete = manifest->complete;
  Status status;
  {
    FramePipeline pipeline(frames, threads - 1);
    RowBatch scratch;
    std::vector<int64_t> metric_counts;  // of the file being read, by interner id
    size_t next = 0;
    for (FileWork& w : works) {
      LoadedFile loaded{w.file->path, w.file->node, w.file->site, out->size(), 0};
      for (size_t k = 0; k < w.frames.size() && status.ok(); ++k, ++next) {
        std::string_view text;
        status = pipeline.Get(next, &text);
        if (!status.ok()) break;
        const std::string where = FrameWhere(w.file->path, k, w.frames[k].offset);
        if (direct) {
          size_t from = out->size();
          status = FrameDecoder::Parse(text, interner, out, where);
          if (status.ok()) w.tally.CountRows(*out, from, &metric_counts);
          if (!options.keep_raw) {  // the frame's text is not kept: drop it
            out->raw.resize(base_raw);
            out->raw_end.resize(base_raw_end);
          }
        } else {
          scratch.Clear();
          status = FrameDecoder::Parse(text, interner, &scratch, where);
          if (status.ok()) {
            w.tally.CountRows(scratch, 0, &metric_counts);
            status = AppendFiltered(scratch, 0, metric_ids, sel, options.keep_raw, out);
          }
        }
        local.text_bytes += int64_t(text.size());
      }
      if (!status.ok()) break;
      w.tally.AddCounts(&metric_counts, *interner);
      std::vector<std::string> problems = CheckTally(*w.file, w.tally, /*check_bounds=*/false);
      if (!problems.empty()) {
        status = Status::Corruption(problems.front());
        break;
      }
      loaded.end = out->size();
      local.rows_read += w.tally.rows;
      local.compressed_bytes += int64_t(w.size);
      local.files.push_back(std::move(loaded));
    }
  }
  if (!status.ok()) {
    Truncate(out, base_rows, base_raw, base_raw_end);
    return status.code() == Status::Code::kCorruption ? Damaged(dir, status.message()) : status;
  }
  local.rows = int64_t(out->size() - base_rows);
  if (report != nullptr) *report = std::move(local);
  return Status::OK();
}

namespace {

// Verification: every frame of every file decoded in parallel (rows counted, not kept), then
// each file's counts checked. Every problem is collected.
Status VerifyFiles(const Manifest& m, const Selection& selection, int threads,
                   std::vector<FileWork>* works) {
  KWATT_RETURN_IF_ERROR(ReadFiles(m, selection, threads, /*verify=*/true, works));
  struct Unit {
    size_t file, frame;
    int worker = -1;
    Status status;
    int64_t rows = 0;
    std::optional<UnixNanos> first, last;
    std::map<std::string, int64_t> metrics;
  };
  std::vector<Unit> units;
  for (size_t i = 0; i < works->size(); ++i) {
    for (size_t k = 0; k < (*works)[i].frames.size(); ++k) units.push_back(Unit{i, k});
  }
  struct Worker {
    FrameDecoder decoder;
    StringInterner interner;
    RowBatch rows;
    std::vector<int64_t> counts;
  };
  std::vector<std::unique_ptr<Worker>> workers;
  for (int k = 0; k < std::max(1, threads); ++k) workers.push_back(std::make_unique<Worker>());
  ParallelFor(units.size(), threads, [&](size_t u, int k) {
    Unit& unit = units[u];
    Worker& worker = *workers[k];
    const FileWork& w = (*works)[unit.file];
    const FrameSpan& span = w.frames[unit.frame];
    worker.rows.Clear();
    unit.worker = k;
    unit.status = worker.decoder.Decode(std::string_view(w.data.get() + span.offset, span.size),
                                        span.content_size, &worker.interner, &worker.rows,
                                        FrameWhere(w.file->path, unit.frame, span.offset));
    if (!unit.status.ok()) return true;
    FileTally tally;
    tally.CountRows(worker.rows, 0, &worker.counts);
    tally.AddCounts(&worker.counts, worker.interner);
    unit.rows = tally.rows;
    unit.first = tally.first;
    unit.last = tally.last;
    unit.metrics = std::move(tally.metrics);
    return true;
  });
  size_t u = 0;
  for (FileWork& w : *works) {
    bool decoded = w.framed;
    for (size_t k = 0; k < w.frames.size(); ++k, ++u) {
      Unit& unit = units[u];
      if (!unit.status.ok()) {
        if (unit.status.code() != Status::Code::kCorruption) return unit.status;
        w.problems.push_back(unit.status.message());
        decoded = false;
        continue;
      }
      w.tally.rows += unit.rows;
      if (unit.first && !w.tally.first) w.tally.first = unit.first;
      if (unit.last) w.tally.last = unit.last;
      for (const auto& [metric, rows] : unit.metrics) w.tally.metrics[metric] += rows;
    }
    if (decoded) {
      for (std::string& problem : CheckTally(*w.file, w.tally, /*check_bounds=*/true)) {
        w.problems.push_back(std::move(problem));
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status VerifyArchive(const std::string& dir, VerifyReport* report) {
  *report = VerifyReport();
  Result<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  report->complete = manifest->complete;
  LoadOptions options;
  options.allow_incomplete = true;
  Result<Selection> selection = Select(*manifest, options);
  if (!selection.ok()) return selection.status();

  // Files the manifest does not list (an incomplete archive's data/ may hold files of nodes with
  // nothing committed yet: only those the manifest or journal name are expected).
  std::set<std::string> listed;
  for (const ManifestFile& f : manifest->files) listed.insert(f.path);
  std::error_code error;
  std::vector<std::string> extra;
  fs::path data_dir = fs::path(dir) / kDataDir;
  if (fs::is_directory(data_dir, error)) {
    for (const auto& entry : fs::directory_iterator(data_dir, error)) {
      std::string rel = std::string(kDataDir) + "/" + entry.path().filename().string();
      if (!listed.count(rel)) extra.push_back(rel);
    }
  }
  std::sort(extra.begin(), extra.end());

  std::vector<FileWork> works;
  Status io_error = VerifyFiles(*manifest, *selection, ThreadCount(0), &works);
  for (const FileWork& w : works) {
    ++report->files;
    report->bytes += int64_t(w.size);
    report->rows += w.tally.rows;
    for (const std::string& problem : w.problems) report->problems.push_back(problem);
  }
  if (manifest->complete) {
    for (const std::string& rel : extra) {
      report->problems.push_back(rel + ": not listed in the manifest (a file that does not belong "
                                 "to the archive)");
    }
  }
  if (!io_error.ok()) return io_error;
  if (!report->problems.empty()) {
    return Status::Corruption("archive " + dir + " is damaged: " + report->problems.front() +
                              (report->problems.size() > 1
                                   ? " (and " + std::to_string(report->problems.size() - 1) +
                                         " more problem(s))"
                                   : std::string()));
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// ArchiveReader.

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
  size_t next_file = 0;      // the next file to open
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
        status = Damaged(manifest.dir, f.path + ": its XXH64 is " + hash +
                                           ", the manifest records " + f.xxh64 +
                                           " (its bytes changed)");
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
