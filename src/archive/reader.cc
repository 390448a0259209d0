#include "kwatt/archive/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <tuple>

#include "kwatt/archive/format.h"
#include "kwatt/core/node_name.h"
#include "src/archive/read_internal.h"

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
//
// The files: manifest.cc (the manifest and the journal), frames.cc (zstd frames), this one (what
// the readers share: selection, file checks, row tallies, parallel reading; read_internal.h),
// load.cc (LoadArchive), verify.cc (VerifyArchive), stream.cc (ArchiveReader).

namespace kwatt::archive::internal {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string JoinList(const std::vector<std::string>& items, size_t max_items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > max_items) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out.empty() ? "none" : out;
}

std::string Errno() { return std::strerror(errno); }

Result<Selection> Select(const Manifest& m, const LoadOptions& options) {
  if (!m.complete && !options.allow_incomplete)
    return Status::Incomplete(IncompleteArchiveMessage(m));
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
    Result<NodeName> name = ParseNodeName(text);
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
    for (const ClusterCatalogue& cluster : m.catalogue) {
      for (const CatalogueEntry& entry : cluster.catalogue.entries()) known.insert(entry.name);
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

int ThreadCount(int asked) {
  if (asked > 0) return asked;
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : int(hardware);
}

// Phase 1 for one file: read it, check its size and hash, split it into frames.
static void ReadAndSplit(const Manifest& m, FileWork* w) {
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
    ReadAndSplit(m, &w);
    return w.io_error.ok() && (verify || w.problems.empty());
  });
  for (const FileWork& w : *works) {
    if (!w.io_error.ok()) return w.io_error;
    if (!w.problems.empty() && !verify) return Damaged(m.dir, w.problems.front());
  }
  return Status::OK();
}

}  // namespace kwatt::archive::internal
