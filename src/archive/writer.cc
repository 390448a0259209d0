#include "kwatt/archive/writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kwatt/archive/format.h"
#include "kwatt/archive/lock.h"
#include "kwatt/archive/manifest.h"
#include "kwatt/core/text.h"
#include "kwatt/core/zstd_frame.h"
#include "src/archive/frames.h"

namespace kwatt::archive {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

constexpr UnixNanos kNoneYet = INT64_MIN;

Status Errno(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

Status WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write " + path);
    }
    data += n;
    size -= size_t(n);
  }
  return Status::OK();
}

// Replaces `path` by `text` so that a crash leaves either the old or the new content.
Status WriteAtomically(const fs::path& path, const std::string& text) {
  fs::path temporary = path;
  temporary += ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Errno("cannot create " + temporary.string());
  Status status = WriteAll(fd, text.data(), text.size(), temporary.string());
  if (status.ok() && ::fsync(fd) != 0) status = Errno("cannot sync " + temporary.string());
  ::close(fd);
  KWATT_RETURN_IF_ERROR(status);
  if (::rename(temporary.c_str(), path.c_str()) != 0)
    return Errno("cannot rename to " + path.string());
  int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::OK();
}

// The job of a --job backup as OAR told it (doc/archive_format.md).
ordered_json JobJson(const RowsReport& resolved) {
  ordered_json out;
  out["user"] = resolved.job_user;
  out["started_at"] = FormatUtcTimestamp(resolved.job_started);
  out["stopped_at"] = resolved.job_stopped ? ordered_json(FormatUtcTimestamp(*resolved.job_stopped))
                                           : ordered_json(nullptr);
  return out;
}

ordered_json QueryJson(const BackupQuery& q) {
  ordered_json out;
  out["api"] = q.api;
  out["nodes"] = q.nodes;
  out["job"] =
      q.job ? ordered_json{{"site", q.job->site}, {"id", q.job->id}} : ordered_json(nullptr);
  out["start"] = q.start ? ordered_json(FormatEpochSeconds(*q.start)) : ordered_json(nullptr);
  out["end"] = q.end ? ordered_json(FormatEpochSeconds(*q.end)) : ordered_json(nullptr);
  out["metrics"] = q.metrics;
  out["summary"] = q.summary;
  return out;
}

}  // namespace

struct ArchiveWriter::Impl {
  struct File {
    std::string rel;   // "data/nova-1.lyon.grid5000.fr.jsonl.zst"
    std::string node;  // FQDN, or "" for the _other file of a site
    int fd = -1;
    // Committed: on disk, synced and journaled (or about to be, when dirty).
    uint64_t bytes = 0, rows = 0, frames = 0;
    UnixNanos next = kNoneYet;
    std::map<std::string, int64_t> metrics;
    std::string first, last;
    bool dirty = false;
    // The frame being filled.
    std::string frame;
    uint64_t frame_rows = 0;
    std::map<std::string, int64_t> frame_metrics;
    std::string frame_first, frame_last;
    UnixNanos frame_last_time = kNoneYet;
    std::optional<UnixNanos> close_at;
    bool stalled = false;  // a piece of this node failed: nothing more is committed this run

    void ClearFrame() {
      frame.clear();
      frame_rows = 0;
      frame_metrics.clear();
      frame_first.clear();
      close_at.reset();
    }
  };

  fs::path dir;
  BackupQuery query;
  std::string version;
  ordered_json manifest;
  std::map<std::string, File> files;  // by rel
  std::vector<std::string> order;     // rels, manifest order
  std::vector<std::string> node_fqdns;
  kwatt::internal::ZstdFrameEncoder encoder{kZstdLevel};
  int journal = -1;
  UnixNanos window_start = 0, window_end = 0;
  bool have_window = false;
  std::string compressed;
  std::shared_ptr<Clock> clock;
  bool recording = false;   // WriterOptions::recording
  UnixNanos opened_at = 0;  // now() when Open() ran
  // The window of a job asked without an end was taken up to the moment the fetch asked (the job
  // had not ended): a rerun takes it further, up to the job's end.
  bool window_open = false;
  // Held from Open() to the end: one writer at a time, and readers see a backup running now.
  std::optional<ArchiveLock> lock;
  // A new archive: nothing is written before Begin() (the query resolved: nodes, job, metrics
  // and credentials checked by the API), so that a refused query leaves nothing behind.
  bool fresh = false;
  bool created_dir = false;  // Open() created the directory (removed again if nothing began)
  bool begun = false;

  // A job without an explicit end: its window ends when the job ends, which a later run may see.
  bool Extendable() const { return query.job.has_value() && !query.end.has_value(); }

  ~Impl() {
    for (auto& [rel, file] : files) {
      if (file.fd >= 0) ::close(file.fd);
    }
    if (journal >= 0) ::close(journal);
    if (fresh && !begun && created_dir) {
      std::error_code error;
      fs::remove(dir, error);  // only when still empty
    }
  }

  Status OpenJournal() {
    if (journal >= 0) return Status::OK();
    journal = ::open((dir / kJournalName).c_str(),
                     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (journal < 0) return Errno("cannot open the journal of " + dir.string());
    return Status::OK();
  }

  Status OpenFile(File& file) {
    if (file.fd >= 0) return Status::OK();
    fs::path path = dir / file.rel;
    file.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (file.fd < 0) return Errno("cannot open " + path.string());
    if (::ftruncate(file.fd, off_t(file.bytes)) != 0) return Errno("cannot cut " + path.string());
    if (::lseek(file.fd, off_t(file.bytes), SEEK_SET) < 0)
      return Errno("cannot seek " + path.string());
    return Status::OK();
  }

  File& FileFor(std::string_view site, std::string_view device) {
    std::string fqdn = std::string(device) + "." + std::string(site) + ".grid5000.fr";
    bool is_node = std::find(node_fqdns.begin(), node_fqdns.end(), fqdn) != node_fqdns.end();
    std::string rel = is_node ? NodeFileName(fqdn) : OtherFileName(site);
    auto it = files.find(rel);
    if (it == files.end()) {
      File file;
      file.rel = rel;
      file.node = is_node ? fqdn : "";
      it = files.emplace(rel, std::move(file)).first;
      order.push_back(rel);
    }
    return it->second;
  }

  Status CommitFrame(File& file, UnixNanos next) {
    if (file.frame.empty()) {
      file.next = std::max(file.next, next);
      return Status::OK();
    }
    KWATT_RETURN_IF_ERROR(OpenFile(file));
    KWATT_RETURN_IF_ERROR(encoder.Compress(file.frame, &compressed));
    size_t n = compressed.size();
    Status written = WriteAll(file.fd, compressed.data(), n, (dir / file.rel).string());
    if (!written.ok()) {
      // A frame cut by a full disk is taken back: the frame stays to be committed again, after
      // the committed part, once there is room.
      if (::ftruncate(file.fd, off_t(file.bytes)) != 0 ||
          ::lseek(file.fd, off_t(file.bytes), SEEK_SET) < 0) {
        ::close(file.fd);
        file.fd = -1;  // OpenFile cuts it back when it opens it again
      }
      return written;
    }
    file.bytes += n;
    file.rows += file.frame_rows;
    file.frames += 1;
    for (const auto& [metric, count] : file.frame_metrics) file.metrics[metric] += count;
    if (file.first.empty()) file.first = file.frame_first;
    file.last = file.frame_last;
    file.next = next;
    file.dirty = true;
    file.ClearFrame();
    return Status::OK();
  }

  // Syncs the data of every file with new frames, then records them in the journal.
  Status SyncAndJournal() {
    std::string lines;
    for (const std::string& rel : order) {
      File& file = files.at(rel);
      if (!file.dirty) continue;
      if (::fsync(file.fd) != 0) return Errno("cannot sync " + (dir / rel).string());
      ordered_json record;
      record["file"] = rel;
      record["bytes"] = file.bytes;
      record["rows"] = file.rows;
      record["frames"] = file.frames;
      record["next"] = file.next;
      record["first"] = file.first;
      record["last"] = file.last;
      record["metrics"] = file.metrics;
      lines += record.dump() + "\n";
      file.dirty = false;
    }
    if (lines.empty()) return Status::OK();
    KWATT_RETURN_IF_ERROR(
        WriteAll(journal, lines.data(), lines.size(), (dir / kJournalName).string()));
    if (::fsync(journal) != 0) return Errno("cannot sync the journal");
    return Status::OK();
  }

  Status WriteManifest() { return WriteAtomically(dir / kManifestName, manifest.dump(2) + "\n"); }

  // Takes the journal of an interrupted run (parsed and checked by ParseJournal: the last valid
  // record of each file wins).
  void Recover(const std::vector<JournalRecord>& records) {
    for (const JournalRecord& record : records) {
      File& file = files[record.path];
      if (file.rel.empty()) {
        file.rel = record.path;
        order.push_back(record.path);
      }
      file.bytes = uint64_t(record.bytes);
      file.rows = uint64_t(record.rows);
      file.frames = uint64_t(record.frames);
      file.next = record.next;
      file.first = record.first;
      file.last = record.last;
      file.metrics.clear();
      for (const auto& [metric, rows] : record.metrics) file.metrics[metric] = rows;
    }
  }

  // Checks that a file holds what the journal records as committed: at least its bytes, in its
  // frames (whole, checksums right), with its rows. Corruption otherwise, naming what to do.
  Status CheckCommitted(const File& file) {
    fs::path path = dir / file.rel;
    auto damaged = [&](const std::string& what) {
      return Status::Corruption("cannot resume the backup in " + dir.string() + ": " + file.rel +
                                " " + what + ", the journal records " + std::to_string(file.bytes) +
                                " bytes (" + std::to_string(file.rows) +
                                " rows) committed in it. The archive was changed since: "
                                "back up again into a new directory (or remove " +
                                dir.string() + " first)");
    };
    struct stat info;
    if (::lstat(path.c_str(), &info) != 0) {
      if (errno != ENOENT) return Errno("cannot read " + path.string());
      if (file.bytes == 0) return Status::OK();
      return damaged("is missing");
    }
    if (!S_ISREG(info.st_mode)) return damaged("is not a regular file");
    if (uint64_t(info.st_size) < file.bytes) {
      return damaged("is truncated: it has " + std::to_string(info.st_size) + " bytes");
    }
    if (file.bytes == 0) return Status::OK();
    // Mapped, not read: the committed part may be gigabytes.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return Errno("cannot open " + path.string());
    void* mapped = ::mmap(nullptr, file.bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    Status mapping = mapped == MAP_FAILED ? Errno("cannot read " + path.string()) : Status::OK();
    ::close(fd);
    KWATT_RETURN_IF_ERROR(mapping);
    struct Unmap {
      void* data;
      size_t size;
      ~Unmap() { ::munmap(data, size); }
    } unmap{mapped, file.bytes};
    std::string_view data(static_cast<const char*>(mapped), file.bytes);
    std::vector<internal::FrameSpan> spans;
    Status status = internal::SplitFrames(file.rel, data, &spans);
    if (!status.ok()) return damaged("is damaged (" + status.message() + ")");
    if (spans.size() != file.frames) {
      return damaged("has " + std::to_string(spans.size()) + " frames where the journal records " +
                     std::to_string(file.frames));
    }
    internal::FrameDecoder decoder;
    uint64_t rows = 0;
    for (size_t k = 0; k < spans.size(); ++k) {
      std::string_view text;
      status =
          decoder.Decompress(data.substr(spans[k].offset, spans[k].size), spans[k].content_size,
                             internal::FrameWhere(file.rel, k, spans[k].offset), &text);
      if (!status.ok()) return damaged("is damaged (" + status.message() + ")");
      rows += uint64_t(std::count(text.begin(), text.end(), '\n'));
    }
    if (rows != file.rows) {
      return damaged("holds " + std::to_string(rows) + " rows in its committed frames");
    }
    return Status::OK();
  }
};

ArchiveWriter::~ArchiveWriter() = default;

namespace {

// The content of a small file; *exists false when there is none.
Status ReadText(const fs::path& path, std::string* text, bool* exists) {
  std::error_code error;
  *exists = fs::exists(path, error);
  text->clear();
  if (!*exists) return Status::OK();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Errno("cannot open " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return Status::OK();
}

// The query as the manifest records it (parsed) equals `query`, the API included: rows resumed
// from another API (another testbed, a store, a simulator) would complete one archive with two
// sources' rows, each looking whole.
bool SameQuery(const Manifest::Query& stored, const BackupQuery& query) {
  return stored.api == query.api && stored.nodes == query.nodes &&
         stored.job_site == (query.job ? query.job->site : std::string()) &&
         stored.job_id == (query.job ? query.job->id : 0) &&
         stored.start == (query.start ? FormatEpochSeconds(*query.start) : std::string()) &&
         stored.end == (query.end ? FormatEpochSeconds(*query.end) : std::string()) &&
         stored.metrics == query.metrics && stored.summary == query.summary;
}

std::string DescribeQuery(const Manifest::Query& q) {
  ordered_json out;
  out["api"] = q.api;
  out["nodes"] = q.nodes;
  out["job"] = q.job_site.empty() ? ordered_json(nullptr)
                                  : ordered_json{{"site", q.job_site}, {"id", q.job_id}};
  out["start"] = q.start.empty() ? ordered_json(nullptr) : ordered_json(q.start);
  out["end"] = q.end.empty() ? ordered_json(nullptr) : ordered_json(q.end);
  out["metrics"] = q.metrics;
  out["summary"] = q.summary;
  return out.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// Whether a directory without a manifest holds only what this writer leaves when it is stopped
// before its first manifest is in place: an empty data/, an empty journal, and a manifest.json.tmp
// that is (the start of) one of its manifests. Such leftovers are a fresh start.
bool OnlyLeftovers(const fs::path& dir) {
  std::error_code error;
  const std::string manifest_start = "{\n  \"format\": \"" + std::string(kFormatName) + "\"";
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (name == kDataDir) {
      if (!entry.is_directory(error) || entry.is_symlink(error) ||
          !fs::is_empty(entry.path(), error)) {
        return false;
      }
    } else if (name == kJournalName) {
      if (!entry.is_regular_file(error) || entry.is_symlink(error) ||
          fs::file_size(entry.path(), error) != 0) {
        return false;
      }
    } else if (name == std::string(kManifestName) + ".tmp") {
      if (!entry.is_regular_file(error) || entry.is_symlink(error)) return false;
      std::string text;
      bool exists = false;
      if (!ReadText(entry.path(), &text, &exists).ok()) return false;
      size_t n = std::min(text.size(), manifest_start.size());
      if (text.compare(0, n, manifest_start, 0, n) != 0) return false;
    } else {
      return false;
    }
  }
  return !error;
}

}  // namespace

Result<std::unique_ptr<ArchiveWriter>> ArchiveWriter::Open(const std::string& dir_text,
                                                           const BackupQuery& query,
                                                           const std::string& kwatt_version,
                                                           const WriterOptions& options) {
  if (dir_text.empty()) {  // "" would be the current directory
    return Status::InvalidArgument("the archive directory is empty: give a path");
  }
  std::unique_ptr<ArchiveWriter> writer(new ArchiveWriter());
  writer->impl_ = std::make_unique<Impl>();
  Impl& impl = *writer->impl_;
  impl.dir = fs::path(dir_text);
  impl.query = query;
  impl.version = kwatt_version;
  impl.clock = options.clock ? options.clock : SystemClock();
  impl.recording = options.recording;
  impl.opened_at = impl.clock->WallNanos();
  std::error_code error;
  if (fs::exists(impl.dir, error) && !fs::is_directory(impl.dir, error)) {
    return Status::InvalidArgument(dir_text +
                                   " is a file, not a directory: an archive is a directory; give "
                                   "the path of a new (or empty) directory");
  }
  if (!fs::exists(impl.dir, error)) {
    impl.created_dir = fs::create_directories(impl.dir, error);
    if (error) return Status::IOError("cannot create " + dir_text + ": " + error.message());
  }
  Result<ArchiveLock> lock = ArchiveLock::Take(dir_text);
  if (!lock.ok()) return lock.status();
  impl.lock.emplace(std::move(*lock));
  fs::path manifest_path = impl.dir / kManifestName;
  if (fs::exists(manifest_path, error)) {
    // The one parser of manifests and journals: every field checked, nothing trusted.
    std::string text, journal;
    bool exists = false, has_journal = false;
    KWATT_RETURN_IF_ERROR(ReadText(manifest_path, &text, &exists));
    KWATT_RETURN_IF_ERROR(ReadText(impl.dir / kJournalName, &journal, &has_journal));
    // Another program's manifest.json: the wrong directory (not a damaged archive).
    ordered_json foreign = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (foreign.is_object() && (!foreign.contains("format") || foreign["format"] != kFormatName)) {
      return Status::InvalidArgument(manifest_path.string() +
                                     " is not a kwatt archive manifest: choose another directory");
    }
    Result<Manifest> stored = ParseManifest(dir_text, text, has_journal ? &journal : nullptr);
    if (!stored.ok()) return stored.status();
    if (stored->query.api != query.api) {
      return Status::InvalidArgument(
          dir_text + " holds a backup from another API (" + stored->query.api + ", not " +
          query.api + "): a resumed backup takes its rows from the API it began with; rerun it " +
          "with --api " + stored->query.api + ", or choose another directory");
    }
    if (!SameQuery(stored->query, query)) {
      return Status::InvalidArgument(
          dir_text + " holds the backup of another query (" + DescribeQuery(stored->query) +
          "): choose another directory, or rerun exactly that query to complete it");
    }
    if (stored->complete) {
      writer->already_complete_ = true;
      return writer;
    }
    writer->resuming_ = true;
    // Validated above: parsing it again cannot fail, and only its object is kept to be rewritten.
    impl.manifest = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!impl.manifest.is_object()) return Status::Internal("manifest.json parsed twice differs");
    if (stored->has_window) {
      impl.window_start = stored->window_start;
      impl.window_end = stored->window_end;
      impl.have_window = true;
      for (const ManifestNode& node : stored->nodes) impl.node_fqdns.push_back(node.node);
    }
    impl.Recover(ParseJournal(journal));
    for (const std::string& rel : impl.order) {
      KWATT_RETURN_IF_ERROR(impl.CheckCommitted(impl.files.at(rel)));
    }
    // Files of the data directory with nothing journaled start again from nothing.
    for (const auto& entry : fs::directory_iterator(impl.dir / kDataDir, error)) {
      std::string rel = std::string(kDataDir) + "/" + entry.path().filename().string();
      if (!impl.files.count(rel) && entry.is_regular_file(error) && !entry.is_symlink(error)) {
        fs::resize_file(entry.path(), 0, error);
      }
    }
    fs::create_directories(impl.dir / kDataDir, error);
    KWATT_RETURN_IF_ERROR(impl.OpenJournal());
    impl.begun = true;
  } else {
    if (!fs::is_empty(impl.dir, error) && !OnlyLeftovers(impl.dir)) {
      return Status::InvalidArgument(dir_text +
                                     " is not empty and holds no kwatt archive: "
                                     "choose a new or empty directory");
    }
    // Written by Begin(), once the API has accepted the query.
    impl.fresh = true;
    impl.manifest = ordered_json::object();
    impl.manifest["format"] = kFormatName;
    impl.manifest["format_version"] = kFormatVersion;
    impl.manifest["kwatt_version"] = kwatt_version;
    impl.manifest["state"] = kStateIncomplete;
    impl.manifest["created_at"] = FormatUtcTimestamp(impl.clock->WallNanos());
    impl.manifest["query"] = QueryJson(query);
  }
  return writer;
}

FetchWindow ArchiveWriter::WindowToRun(const FetchWindow& asked) const {
  FetchWindow query = asked;
  const Impl& impl = *impl_;
  if (!resuming_ || !impl.have_window) return query;
  // A job without an end is resolved again: it may have ended since (a longer window).
  if (!impl.Extendable()) query.end = impl.window_end;
  UnixNanos start = impl.window_end;
  for (const std::string& fqdn : impl.node_fqdns) {
    auto it = impl.files.find(NodeFileName(fqdn));
    UnixNanos next = it == impl.files.end() ? kNoneYet : it->second.next;
    start = std::min(start, std::max(next, impl.window_start));
  }
  query.start = start;
  return query;
}

Status ArchiveWriter::Begin(const RowsReport& resolved) {
  Impl& impl = *impl_;
  if (impl.have_window) {
    if (resolved.end != impl.window_end && !impl.recording) {
      if (!impl.Extendable()) return Status::Internal("resumed backup resolved another window");
      // The job ran on, or has ended, since the last run: its window ends at the new end. It may
      // be a little before the moment the last run took the window to (a job's end is in whole
      // seconds, and may be known late): fine as long as nothing committed lies after it.
      for (const auto& [rel, file] : impl.files) {
        Result<ParsedTime> last = ParseIsoTimestamp(file.last);
        if (file.rows > 0 && last.ok() && last->utc > resolved.end) {
          return Status::InvalidArgument("job " + impl.query.job->site + ":" +
                                         std::to_string(impl.query.job->id) + " ended at " +
                                         FormatUtcTimestamp(resolved.end) +
                                         ", before rows that an earlier "
                                         "run committed in " +
                                         impl.dir.string() + " (" + rel + " up to " + file.last +
                                         "): back up again into a new directory");
        }
      }
      impl.window_end = resolved.end;
      if (impl.query.job) impl.manifest["job"] = JobJson(resolved);  // it may have ended since
      ordered_json& window = impl.manifest["window"];
      window["end"] = FormatUtcTimestamp(resolved.end);
      window["end_ns"] = resolved.end;
      KWATT_RETURN_IF_ERROR(impl.WriteManifest());
    }
    impl.window_open = impl.Extendable() && resolved.end >= impl.opened_at;
  } else {
    impl.window_open = impl.Extendable() && resolved.end >= impl.opened_at;
    impl.window_start = resolved.start;
    impl.window_end = resolved.end;
    impl.have_window = true;
    ordered_json window;
    window["start"] = FormatUtcTimestamp(resolved.start);
    window["end"] = FormatUtcTimestamp(resolved.end);
    window["start_ns"] = resolved.start;
    window["end_ns"] = resolved.end;
    impl.manifest["window"] = window;
    ordered_json sites = ordered_json::array(), nodes = ordered_json::array();
    for (const NodeName& node : resolved.nodes) {
      if (std::find(sites.begin(), sites.end(), node.site) == sites.end())
        sites.push_back(node.site);
      nodes.push_back({{"node", node.Fqdn()},
                       {"uid", node.uid},
                       {"site", node.site},
                       {"cluster", node.Cluster()},
                       {"file", NodeFileName(node.Fqdn())}});
      impl.node_fqdns.push_back(node.Fqdn());
    }
    impl.manifest["sites"] = sites;
    impl.manifest["job_types"] = resolved.job_types;
    if (impl.query.job) impl.manifest["job"] = JobJson(resolved);
    impl.manifest["nodes"] = nodes;
    ordered_json catalogue = ordered_json::object();
    for (const ClusterCatalogue& cluster : resolved.catalogues) {
      catalogue[cluster.cluster] = ordered_json::parse(cluster.catalogue.json());
    }
    impl.manifest["catalogue"] = catalogue;
    ordered_json hardware = ordered_json::object();  // what the reference says of each cluster
    for (const ClusterCatalogue& cluster : resolved.catalogues) {
      if (!cluster.catalogue.model().empty()) {
        hardware[cluster.cluster] = {{"model", cluster.catalogue.model()}};
      }
    }
    if (!hardware.empty()) impl.manifest["hardware"] = hardware;
    std::error_code error;
    fs::create_directories(impl.dir / kDataDir, error);
    if (error) return Status::IOError("cannot create " + (impl.dir / kDataDir).string());
    KWATT_RETURN_IF_ERROR(impl.WriteManifest());
    KWATT_RETURN_IF_ERROR(impl.OpenJournal());
    impl.begun = true;
  }
  // Every node gets its file, in node order, even one without rows.
  std::vector<std::string> ordered;
  for (const std::string& fqdn : impl.node_fqdns) {
    std::string rel = NodeFileName(fqdn);
    Impl::File& file = impl.files[rel];
    file.rel = rel;
    file.node = fqdn;
    KWATT_RETURN_IF_ERROR(impl.OpenFile(file));
    ordered.push_back(rel);
  }
  for (const std::string& rel : impl.order) {
    if (std::find(ordered.begin(), ordered.end(), rel) == ordered.end()) {
      ordered.push_back(rel);
      KWATT_RETURN_IF_ERROR(impl.OpenFile(impl.files.at(rel)));
    }
  }
  impl.order = ordered;
  return Status::OK();
}

Status ArchiveWriter::Write(std::string_view site, const RowBatch& batch,
                            const StringInterner& interner) {
  Impl& impl = *impl_;
  char text[kMaxTimestampLength];
  Impl::File* file = nullptr;
  uint32_t file_device = UINT32_MAX;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch.device[i] != file_device) {
      file = &impl.FileFor(site, interner.Get(batch.device[i]));
      file_device = batch.device[i];
    }
    UnixNanos t = batch.time[i];
    if (file->stalled || t < file->next) continue;  // already in the archive, or after a hole
    if (file->close_at && t >= *file->close_at) {
      KWATT_RETURN_IF_ERROR(impl.CommitFrame(*file, *file->close_at));
    } else if (file->frame.size() >= kMaxFrameTextBytes / 2 && t > file->frame_last_time) {
      // A minute holding that much text: the frame closes before this instant instead, so that
      // no frame exceeds kMaxFrameTextBytes (rows before `t` are all in it: rows come in order).
      KWATT_RETURN_IF_ERROR(impl.CommitFrame(*file, t));
    }
    std::string_view raw = batch.RawRow(i);
    file->frame.append(raw);
    file->frame.push_back('\n');
    ++file->frame_rows;
    ++file->frame_metrics[std::string(interner.Get(batch.metric[i]))];
    std::string stamp(text, FormatTimestamp(t, batch.utc_offset[i], text));
    if (file->frame_first.empty()) file->frame_first = stamp;
    file->frame_last = std::move(stamp);
    file->frame_last_time = t;
    if (impl.recording && !file->close_at) {
      file->close_at = (FloorDiv(t, kRecordingFrameBoundaryNs) + 1) * kRecordingFrameBoundaryNs;
    } else if (!file->close_at && file->frame.size() >= kFrameMinBytes) {
      file->close_at = (FloorDiv(t, kFrameBoundaryNs) + 1) * kFrameBoundaryNs;
    }
    ++rows_written_;
  }
  return impl.SyncAndJournal();
}

Status ArchiveWriter::Failed(const MissingPiece& failure) {
  Impl& impl = *impl_;
  for (const std::string& uid : failure.nodes) {
    Impl::File& file = impl.FileFor(failure.site, uid);
    // Rows after the hole cannot be committed: the file resumes from its last frame next time.
    file.stalled = true;
    file.ClearFrame();
  }
  return Status::OK();
}

int64_t ArchiveWriter::bytes_written() const {
  int64_t total = 0;
  if (impl_) {
    for (const auto& [rel, file] : impl_->files) total += int64_t(file.bytes);
  }
  return total;
}

Status ArchiveWriter::Finish(const RowsReport& report) {
  Impl& impl = *impl_;
  if (!impl.begun) return Status::Internal("ArchiveWriter::Finish before Begin");
  UnixNanos now = impl.clock->WallNanos();
  if (impl.recording && impl.have_window) {
    // The recording ends now: its window ends at its report's end, or at its last row.
    UnixNanos end = std::max(report.end, impl.window_start);
    for (const auto& [rel, file] : impl.files) {
      UnixNanos last = file.frame_rows > 0 ? file.frame_last_time : kNoneYet;
      Result<ParsedTime> committed = ParseIsoTimestamp(file.last);
      if (file.rows > 0 && committed.ok()) last = std::max(last, committed->utc);
      end = std::max(end, last);
    }
    impl.window_end = end;
    ordered_json& window = impl.manifest["window"];
    window["end"] = FormatUtcTimestamp(end);
    window["end_ns"] = end;
    now = std::max(now, end + 1);  // the window has passed: it ends with the recording
  }
  if (impl.have_window && impl.window_open) {
    KWATT_RETURN_IF_ERROR(impl.SyncAndJournal());
    return Status::Incomplete(
        "job " + impl.query.job->site + ":" + std::to_string(impl.query.job->id) +
        " has not ended: its window was taken up to now (" + FormatUtcTimestamp(impl.window_end) +
        "); what was fetched is kept in " + impl.dir.string() +
        "; rerun the same kwatt backup command after the job ends to complete it");
  }
  if (impl.have_window && impl.window_end >= now) {
    // Rows of the end of the window do not exist yet: what is committed is kept, and a rerun once
    // the window has passed fetches the rest (the frames in progress are fetched again).
    KWATT_RETURN_IF_ERROR(impl.SyncAndJournal());
    return Status::Incomplete("the window ends at " + FormatUtcTimestamp(impl.window_end) +
                              ", after now (" + FormatUtcTimestamp(now) +
                              "): what was fetched is kept in " + impl.dir.string() +
                              "; rerun the same kwatt backup command after " +
                              FormatUtcTimestamp(impl.window_end) + " to complete it");
  }
  bool stalled = std::any_of(impl.files.begin(), impl.files.end(),
                             [](const auto& entry) { return entry.second.stalled; });
  if (!report.complete() || stalled) {
    KWATT_RETURN_IF_ERROR(impl.SyncAndJournal());
    return Status::Incomplete(std::to_string(report.failures.size()) +
                              " piece(s) could not be fetched; what was fetched is kept in " +
                              impl.dir.string() +
                              ": run the same kwatt backup command again to complete it");
  }
  for (const std::string& rel : impl.order) {
    KWATT_RETURN_IF_ERROR(impl.CommitFrame(impl.files.at(rel), impl.window_end + 1));
  }
  KWATT_RETURN_IF_ERROR(impl.SyncAndJournal());
  ordered_json files = ordered_json::array();
  std::vector<char> buffer(1 << 20);
  for (const std::string& rel : impl.order) {
    Impl::File& file = impl.files.at(rel);
    XXH64_state_t* state = XXH64_createState();
    XXH64_reset(state, 0);
    std::ifstream in(impl.dir / rel, std::ios::binary);
    while (in) {
      in.read(buffer.data(), std::streamsize(buffer.size()));
      XXH64_update(state, buffer.data(), size_t(in.gcount()));
    }
    uint64_t hash = XXH64_digest(state);
    XXH64_freeState(state);
    ordered_json entry;
    entry["path"] = rel;
    entry["node"] = file.node.empty() ? ordered_json(nullptr) : ordered_json(file.node);
    entry["rows"] = file.rows;
    entry["bytes"] = file.bytes;
    entry["frames"] = file.frames;
    entry["xxh64"] = internal::Hex64(hash);
    entry["first"] = file.first.empty() ? ordered_json(nullptr) : ordered_json(file.first);
    entry["last"] = file.last.empty() ? ordered_json(nullptr) : ordered_json(file.last);
    entry["metrics"] = file.metrics;
    files.push_back(entry);
  }
  impl.manifest["files"] = files;
  impl.manifest["fetch"] = {{"requests", report.requests},
                            {"retries", report.retries},
                            {"splits", report.splits},
                            {"seconds", report.seconds},
                            {"resumed", resuming_}};
  impl.manifest["state"] = kStateComplete;
  impl.manifest["completed_at"] = FormatUtcTimestamp(impl.clock->WallNanos());
  KWATT_RETURN_IF_ERROR(impl.WriteManifest());
  ::close(impl.journal);
  impl.journal = -1;
  std::error_code error;
  fs::remove(impl.dir / kJournalName, error);
  return Status::OK();
}

}  // namespace kwatt::archive
