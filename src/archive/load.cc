// LoadArchive: the selected files read and split in parallel, their frames decompressed ahead by
// helper threads and parsed, in order, straight into the caller's table (reader.cc tells how).
#include <sys/mman.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "kwatt/archive/reader.h"
#include "src/archive/read_internal.h"

namespace kwatt::archive {

using internal::AppendFiltered;
using internal::CheckTally;
using internal::Damaged;
using internal::FileWork;
using internal::FrameDecoder;
using internal::FrameSpan;
using internal::FrameWhere;
using internal::ReadFiles;
using internal::Select;
using internal::Selection;
using internal::ThreadCount;
using internal::TooMuchText;

namespace {

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
    if (helpers <= 0) return;
    helpers_.emplace(size_t(helpers));
    for (int k = 0; k < helpers; ++k) helpers_->Post([this] { Run(); });
  }
  ~FramePipeline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (helpers_) helpers_->Join();
  }

  // The text of frame i (in order: i = 0, 1, 2...), valid until the next call.
  Status Get(size_t i, std::string_view* text) {
    if (!helpers_) {  // no helper: decompress here
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
  std::optional<WorkerPool> helpers_;  // each runs Run() until the frames are done
};

}  // namespace

Status LoadArchive(const std::string& dir, const LoadOptions& options, StringInterner* interner,
                   RowBatch* out, LoadReport* report) {
  if (options.threads < 0 || options.threads > kMaxLoadThreads) {
    return Status::InvalidArgument("threads must be 0 (as many as the machine has) to " +
                                   std::to_string(kMaxLoadThreads) + ", not " +
                                   std::to_string(options.threads));
  }
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
        if (options.cancelled && options.cancelled()) {
          status = Status::Incomplete("interrupted");
          break;
        }
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

}  // namespace kwatt::archive
