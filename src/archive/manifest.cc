#include "kwatt/archive/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "kwatt/archive/format.h"
#include "kwatt/archive/lock.h"
#include "kwatt/core/text.h"

namespace kwatt::archive {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

std::string Errno() { return std::strerror(errno); }
// The whole content of a small file (the manifest, the journal).
Status ReadSmallFile(const fs::path& path, std::string* out, bool* exists) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *exists = false;
      return Status::OK();
    }
    return Status::IOError("cannot open " + path.string() + ": " + Errno());
  }
  *exists = true;
  out->clear();
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status status = Status::IOError("cannot read " + path.string() + ": " + Errno());
      ::close(fd);
      return status;
    }
    if (n == 0) break;
    out->append(buffer, size_t(n));
  }
  ::close(fd);
  return Status::OK();
}

// The site of "nova-1.lyon.grid5000.fr", or of "data/_other.lyon.jsonl.zst"; "" if none.
std::string SiteOfFqdn(const std::string& fqdn) {
  size_t dot = fqdn.find('.');
  if (dot == std::string::npos) return "";
  size_t next = fqdn.find('.', dot + 1);
  return fqdn.substr(dot + 1, next == std::string::npos ? std::string::npos : next - dot - 1);
}
std::string SiteOfOtherFile(const std::string& path) {
  std::string prefix = std::string(kDataDir) + "/_other.";
  if (path.compare(0, prefix.size(), prefix) != 0) return "";
  return path.substr(prefix.size(), path.size() - prefix.size() - kDataSuffix.size());
}

// ---------------------------------------------------------------------------------------------
// The manifest and the journal.

const char kManifestDamaged[] =
    "the manifest is damaged: restore the archive from a copy, or back up again into a new "
    "directory";

class ManifestReader {
 public:
  explicit ManifestReader(std::string file) : file_(std::move(file)) {}

  Status Bad(const std::string& where, const std::string& what) const {
    return Status::Corruption(file_ + ": " + where + " " + what + "; " + kManifestDamaged);
  }

  // A member that may be absent or null (then `present` is false).
  const Json* Member(const Json& object, const char* key) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status String(const Json& object, const char* key, const std::string& where, bool required,
                std::string* out) const {
    const Json* value = Member(object, key);
    if (value == nullptr) {
      if (required) return Bad(where, "lacks \"" + std::string(key) + "\"");
      out->clear();
      return Status::OK();
    }
    if (!value->is_string()) return Bad(where + "." + key, "should be a string");
    *out = value->get<std::string>();
    return Status::OK();
  }

  Status Count(const Json& object, const char* key, const std::string& where, bool required,
               int64_t* out) const {
    const Json* value = Member(object, key);
    if (value == nullptr) {
      if (required) return Bad(where, "lacks \"" + std::string(key) + "\"");
      *out = 0;
      return Status::OK();
    }
    if (!value->is_number_integer() ||
        (value->is_number_unsigned() ? value->get<uint64_t>() > uint64_t(INT64_MAX)
                                     : value->get<int64_t>() < 0)) {
      return Bad(where + "." + key, "should be a non-negative integer, not " + value->dump());
    }
    *out = value->get<int64_t>();
    return Status::OK();
  }

  Status StringList(const Json& object, const char* key, const std::string& where,
                    std::vector<std::string>* out) const {
    out->clear();
    const Json* value = Member(object, key);
    if (value == nullptr) return Status::OK();
    if (!value->is_array()) return Bad(where + "." + key, "should be an array of strings");
    for (const Json& item : *value) {
      if (!item.is_string()) return Bad(where + "." + key, "should be an array of strings");
      out->push_back(item.get<std::string>());
    }
    return Status::OK();
  }

  Status Metrics(const Json& object, const std::string& where,
                 std::vector<std::pair<std::string, int64_t>>* out) const {
    out->clear();
    const Json* value = Member(object, "metrics");
    if (value == nullptr) return Status::OK();
    if (!value->is_object()) return Bad(where + ".metrics", "should be an object of row counts");
    for (auto it = value->begin(); it != value->end(); ++it) {
      int64_t count = 0;
      KWATT_RETURN_IF_ERROR(Count(*value, it.key().c_str(), where + ".metrics", true, &count));
      out->emplace_back(it.key(), count);
    }
    return Status::OK();
  }

  Status Timestamp(const Json& object, const char* key, const std::string& where, bool required,
                   std::string* text) const {
    KWATT_RETURN_IF_ERROR(String(object, key, where, required, text));
    if (text->empty() && required) return Bad(where + "." + key, "is empty, not a timestamp");
    if (!text->empty()) {
      Result<ParsedTime> parsed = ParseIsoTimestamp(*text);
      if (!parsed.ok()) return Bad(where + "." + key, "is not a timestamp: " + *text);
    }
    return Status::OK();
  }

 private:
  std::string file_;
};

Status ParseManifestFile(const ManifestReader& r, const Json& entry, const std::string& where,
                         ManifestFile* file) {
  if (!entry.is_object()) return r.Bad(where, "should be an object");
  KWATT_RETURN_IF_ERROR(r.String(entry, "path", where, true, &file->path));
  if (!IsDataPath(file->path)) {
    return r.Bad(where + ".path", "is not a data file name (data/<name>.jsonl.zst): " + file->path);
  }
  KWATT_RETURN_IF_ERROR(r.String(entry, "node", where, false, &file->node));
  KWATT_RETURN_IF_ERROR(r.Count(entry, "rows", where, true, &file->rows));
  KWATT_RETURN_IF_ERROR(r.Count(entry, "bytes", where, true, &file->bytes));
  KWATT_RETURN_IF_ERROR(r.Count(entry, "frames", where, true, &file->frames));
  KWATT_RETURN_IF_ERROR(r.String(entry, "xxh64", where, true, &file->xxh64));
  if (file->xxh64.size() != 16 ||
      file->xxh64.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return r.Bad(where + ".xxh64",
                 "should be 16 lowercase hex digits, not \"" + file->xxh64 + "\"");
  }
  KWATT_RETURN_IF_ERROR(r.Timestamp(entry, "first", where, false, &file->first));
  KWATT_RETURN_IF_ERROR(r.Timestamp(entry, "last", where, false, &file->last));
  KWATT_RETURN_IF_ERROR(r.Metrics(entry, where, &file->metrics));
  return Status::OK();
}

// Summary rows are stamped with the start of their 5-minute bucket, which may precede the window.
constexpr int64_t kSummaryBucketNs = 5 * 60 * kNanosPerSecond;

// The parts of a parsed manifest checked against each other (see ReadManifest).
Status CheckConsistency(const ManifestReader& r, const Manifest& m) {
  std::map<std::string, size_t> node_index;  // FQDN -> index in m.nodes
  std::map<std::string, size_t> file_owner;  // a node's file -> index in m.nodes
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const ManifestNode& node = m.nodes[i];
    std::string where = "nodes[" + std::to_string(i) + "] (" + node.node + ")";
    if (!node_index.emplace(node.node, i).second) return r.Bad(where, "repeats a node");
    auto [owner, inserted] = file_owner.emplace(node.file, i);
    if (!inserted) {
      return r.Bad(
          where, "has the file " + node.file + " of nodes[" + std::to_string(owner->second) + "]");
    }
    if (!SiteOfOtherFile(node.file).empty()) {
      return r.Bad(where, "has the file of other devices " + node.file);
    }
  }
  if (!m.complete) return Status::OK();
  std::set<std::string> listed;
  UnixNanos low = m.window_start;
  if (m.query.summary) low = FloorDiv(low, kSummaryBucketNs) * kSummaryBucketNs;
  for (size_t i = 0; i < m.files.size(); ++i) {
    const ManifestFile& f = m.files[i];
    std::string where = "files[" + std::to_string(i) + "] (" + f.path + ")";
    listed.insert(f.path);
    if (!f.node.empty()) {
      auto it = node_index.find(f.node);
      if (it == node_index.end()) {
        return r.Bad(where, "belongs to the node " + f.node + ", which \"nodes\" does not list");
      }
      if (m.nodes[it->second].file != f.path) {
        return r.Bad(
            where, "belongs to the node " + f.node + ", whose file is " + m.nodes[it->second].file);
      }
    } else if (SiteOfOtherFile(f.path).empty()) {
      return r.Bad(where,
                   "has no node and is not a file of other devices "
                   "(data/_other.<site>.jsonl.zst)");
    } else if (file_owner.count(f.path)) {
      return r.Bad(
          where, "has no node, but is the file of the node " + m.nodes[file_owner.at(f.path)].node);
    }
    if (!f.metrics.empty()) {
      int64_t sum = 0;
      bool overflow = false;
      for (const auto& [metric, rows] : f.metrics) {
        overflow = overflow || rows > INT64_MAX - sum;
        if (!overflow) sum += rows;
      }
      if (overflow || sum != f.rows) {
        return r.Bad(where, "counts " + (overflow ? std::string("too many") : std::to_string(sum)) +
                                " rows in its metrics but " + std::to_string(f.rows) +
                                " in \"rows\"");
      }
    }
    if (f.rows == 0) {
      if (!f.first.empty() || !f.last.empty()) {
        return r.Bad(where, "has no rows, but a first or last row timestamp");
      }
      continue;
    }
    if (f.first.empty() || f.last.empty()) {
      return r.Bad(where, "has " + std::to_string(f.rows) +
                              " rows, but lacks the timestamp of "
                              "its first or last row");
    }
    Result<ParsedTime> first = ParseIsoTimestamp(f.first), last = ParseIsoTimestamp(f.last);
    if (!first.ok() || !last.ok()) return r.Bad(where, "has a first or last that is not a time");
    if (first->utc > last->utc) {
      return r.Bad(where, "has its first row (" + f.first + ") after its last (" + f.last + ")");
    }
    if (first->utc < low || last->utc > m.window_end) {
      return r.Bad(where, "has rows from " + f.first + " to " + f.last + ", outside the window (" +
                              FormatUtcTimestamp(m.window_start) + " .. " +
                              FormatUtcTimestamp(m.window_end) + ")");
    }
  }
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (!listed.count(m.nodes[i].file)) {
      return r.Bad("nodes[" + std::to_string(i) + "] (" + m.nodes[i].node + ")",
                   "has no entry in \"files\" (its file " + m.nodes[i].file + ")");
    }
  }
  return Status::OK();
}

// A journal record, or why it is not one.
Status ParseJournalRecord(std::string_view line, JournalRecord* record) {
  Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  ManifestReader r("journal.jsonl");
  if (json.is_discarded()) return r.Bad("a line", "is not JSON");
  if (!json.is_object()) return r.Bad("a line", "is not a JSON object");
  KWATT_RETURN_IF_ERROR(r.String(json, "file", "a record", true, &record->path));
  if (!IsDataPath(record->path)) {
    return r.Bad("a record's file",
                 "is not a data file name (data/<name>.jsonl.zst): " + record->path);
  }
  KWATT_RETURN_IF_ERROR(r.Count(json, "rows", record->path, true, &record->rows));
  KWATT_RETURN_IF_ERROR(r.Count(json, "bytes", record->path, true, &record->bytes));
  KWATT_RETURN_IF_ERROR(r.Count(json, "frames", record->path, true, &record->frames));
  const Json* next = r.Member(json, "next");
  if (next == nullptr) return r.Bad(record->path, "lacks \"next\"");
  if (!next->is_number_integer() ||
      (next->is_number_unsigned() && next->get<uint64_t>() > uint64_t(INT64_MAX))) {
    return r.Bad(record->path + ".next", "should be an integer (nanoseconds), not " + next->dump());
  }
  record->next = next->get<int64_t>();
  KWATT_RETURN_IF_ERROR(r.Timestamp(json, "first", record->path, false, &record->first));
  KWATT_RETURN_IF_ERROR(r.Timestamp(json, "last", record->path, false, &record->last));
  KWATT_RETURN_IF_ERROR(r.Metrics(json, record->path, &record->metrics));
  return Status::OK();
}

}  // namespace

bool IsDataPath(std::string_view path) {
  std::string_view prefix = "data/";
  static_assert(kDataDir == "data");
  if (path.size() <= prefix.size() + kDataSuffix.size() ||
      path.substr(0, prefix.size()) != prefix) {
    return false;
  }
  std::string_view name = path.substr(prefix.size());
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return false;
  }
  return name.size() > kDataSuffix.size() &&
         name.substr(name.size() - kDataSuffix.size()) == kDataSuffix;
}

std::vector<JournalRecord> ParseJournal(std::string_view text, int* skipped) {
  std::vector<JournalRecord> records;
  std::map<std::string, size_t, std::less<>> index;
  if (skipped != nullptr) *skipped = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) break;  // a partial last line
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    JournalRecord record;
    if (!ParseJournalRecord(line, &record).ok()) {
      if (skipped != nullptr) ++*skipped;
      continue;
    }
    auto [it, inserted] = index.emplace(record.path, records.size());
    if (inserted) {
      records.push_back(std::move(record));
    } else {
      records[it->second] = std::move(record);
    }
  }
  return records;
}

int64_t Manifest::rows() const {
  int64_t total = 0;
  for (const ManifestFile& file : files) total += file.rows;
  return total;
}

int64_t Manifest::bytes() const {
  int64_t total = 0;
  for (const ManifestFile& file : files) total += file.bytes;
  return total;
}

std::vector<std::pair<std::string, int64_t>> Manifest::MetricRows() const {
  std::vector<std::pair<std::string, int64_t>> out;
  std::map<std::string, size_t> index;
  for (const ManifestFile& file : files) {
    for (const auto& [metric, rows] : file.metrics) {
      auto [it, inserted] = index.emplace(metric, out.size());
      if (inserted) out.emplace_back(metric, 0);
      out[it->second].second += rows;
    }
  }
  return out;
}

RowsReport Manifest::Resolved() const {
  RowsReport resolved;
  for (const ManifestNode& node : nodes) resolved.nodes.push_back(NodeName{node.uid, node.site});
  resolved.start = window_start;
  resolved.end = window_end;
  resolved.job_types = job_types;
  resolved.job_user = job_user;
  resolved.job_started = job_started;
  resolved.job_stopped = job_stopped;
  resolved.catalogues = catalogue;
  resolved.summary = query.summary;
  return resolved;
}

std::string IncompleteArchiveMessage(const Manifest& m) {
  std::string committed = " (" + std::to_string(m.rows()) + " rows committed so far)";
  std::string partial =
      "read what it holds so far with --allow-incomplete (allow_incomplete in the API)";
  if (m.query.api == kRecordingApi) {  // a kwatt meter recording, not a backup
    if (BeingWritten(m.dir)) {
      return m.dir + " is a kwatt meter recording still running" + committed +
             ": stop the meter (Ctrl-C, or SIGTERM) to finish it, or " + partial;
    }
    return m.dir + " is a kwatt meter recording that stopped before it was finished" + committed +
           ": start the meter again with the same -o archive:" + m.dir +
           " and stop it to finish it, or " + partial;
  }
  if (BeingWritten(m.dir)) {
    return m.dir + " is being written by a kwatt backup running now" + committed +
           ": wait for it to end, or " + partial;
  }
  return m.dir + " is an incomplete archive: its backup stopped before the end" + committed +
         ". Run the same `kwatt backup` command again to complete it, or " + partial;
}

Result<Manifest> ReadManifest(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    if (fs::exists(dir, error)) {
      return Status::NotFound(dir + " is not a directory: give the directory of a kwatt archive");
    }
    return Status::NotFound(dir + ": no such directory");
  }
  fs::path manifest_path = fs::path(dir) / kManifestName;
  std::string file = manifest_path.string();
  std::string text;
  bool exists = false;
  KWATT_RETURN_IF_ERROR(ReadSmallFile(manifest_path, &text, &exists));
  if (!exists) {
    bool has_journal = fs::exists(fs::path(dir) / kJournalName, error);
    return Status::NotFound(
        file + " not found: " + dir +
        (has_journal ? " has a journal but no manifest: it is damaged, back up again into a new "
                       "directory"
                     : " is not a kwatt archive (kwatt backup writes one)"));
  }
  std::string journal;
  bool has_journal = false;
  KWATT_RETURN_IF_ERROR(ReadSmallFile(fs::path(dir) / kJournalName, &journal, &has_journal));
  return ParseManifest(dir, text, has_journal ? &journal : nullptr);
}

namespace {

// "query": what was asked (api, nodes, window, metrics, job, summary).
Status ParseQuery(const ManifestReader& r, const Json& root, Manifest* m) {
  if (const Json* query = r.Member(root, "query")) {
    if (!query->is_object()) return r.Bad("\"query\"", "should be an object");
    KWATT_RETURN_IF_ERROR(r.String(*query, "api", "query", false, &m->query.api));
    m->query.api = UrlWithoutCredentials(m->query.api);  // an older kwatt may have stored them
    KWATT_RETURN_IF_ERROR(r.StringList(*query, "nodes", "query", &m->query.nodes));
    KWATT_RETURN_IF_ERROR(r.String(*query, "start", "query", false, &m->query.start));
    KWATT_RETURN_IF_ERROR(r.String(*query, "end", "query", false, &m->query.end));
    KWATT_RETURN_IF_ERROR(r.StringList(*query, "metrics", "query", &m->query.metrics));
    if (const Json* job = r.Member(*query, "job")) {
      if (!job->is_object()) return r.Bad("query.job", "should be an object");
      KWATT_RETURN_IF_ERROR(r.String(*job, "site", "query.job", true, &m->query.job_site));
      KWATT_RETURN_IF_ERROR(r.Count(*job, "id", "query.job", true, &m->query.job_id));
    }
    if (const Json* summary = r.Member(*query, "summary")) {
      if (!summary->is_boolean()) return r.Bad("query.summary", "should be true or false");
      m->query.summary = summary->get<bool>();
    }
  } else {
    return r.Bad("the manifest", "lacks \"query\"");
  }
  return Status::OK();
}

// "window": the instants the archive covers (required once complete).
Status ParseWindow(const ManifestReader& r, const Json& root, Manifest* m) {
  if (const Json* window = r.Member(root, "window")) {
    if (!window->is_object()) return r.Bad("\"window\"", "should be an object");
    std::string start, end;
    KWATT_RETURN_IF_ERROR(r.Timestamp(*window, "start", "window", true, &start));
    KWATT_RETURN_IF_ERROR(r.Timestamp(*window, "end", "window", true, &end));
    Result<ParsedTime> parsed_start = ParseIsoTimestamp(start);
    Result<ParsedTime> parsed_end = ParseIsoTimestamp(end);
    if (!parsed_start.ok() || !parsed_end.ok()) {  // checked by Timestamp(): not expected
      return r.Bad("\"window\"", "does not hold two timestamps");
    }
    m->window_start = parsed_start->utc;
    m->window_end = parsed_end->utc;
    if (m->window_start > m->window_end) {
      return r.Bad("window.start (" + start + ")", "is after window.end (" + end + ")");
    }
    // The writer records the bounds in nanoseconds too: they must be the same instants.
    for (auto [key, instant, text] : {std::tuple{"start_ns", m->window_start, &start},
                                      std::tuple{"end_ns", m->window_end, &end}}) {
      const Json* ns = r.Member(*window, key);
      if (ns == nullptr) continue;
      if (!ns->is_number_integer() ||
          (ns->is_number_unsigned() && ns->get<uint64_t>() > uint64_t(INT64_MAX))) {
        return r.Bad(std::string("window.") + key, "should be an integer, not " + ns->dump());
      }
      if (ns->get<int64_t>() != instant) {
        return r.Bad(std::string("window.") + key + " (" + ns->dump() + ")",
                     "disagrees with " + *text);
      }
    }
    m->has_window = true;
  } else if (m->complete) {
    return r.Bad("the manifest", "lacks \"window\"");
  }
  return Status::OK();
}

// "job": the OAR job of a job query, when there is one.
Status ParseJob(const ManifestReader& r, const Json& root, Manifest* m) {
  if (const Json* job = r.Member(root, "job"); job != nullptr && !job->is_null()) {
    if (!job->is_object()) return r.Bad("\"job\"", "should be an object");
    if (m->query.job_site.empty()) return r.Bad("\"job\"", "is there but query.job is not");
    std::string started, stopped;
    KWATT_RETURN_IF_ERROR(r.String(*job, "user", "job", false, &m->job_user));
    KWATT_RETURN_IF_ERROR(r.Timestamp(*job, "started_at", "job", true, &started));
    const Json* stop = r.Member(*job, "stopped_at");
    if (stop != nullptr && !stop->is_null()) {
      KWATT_RETURN_IF_ERROR(r.Timestamp(*job, "stopped_at", "job", true, &stopped));
    }
    m->has_job = true;
    m->job_started = ParseIsoTimestamp(started)->utc;  // checked by Timestamp()
    if (!stopped.empty()) m->job_stopped = ParseIsoTimestamp(stopped)->utc;
  }
  return Status::OK();
}

// "nodes": the nodes and their data files (required once complete).
Status ParseNodes(const ManifestReader& r, const Json& root, Manifest* m) {
  if (const Json* nodes = r.Member(root, "nodes")) {
    if (!nodes->is_array()) return r.Bad("\"nodes\"", "should be an array");
    for (size_t i = 0; i < nodes->size(); ++i) {
      const Json& entry = (*nodes)[i];
      std::string where = "nodes[" + std::to_string(i) + "]";
      if (!entry.is_object()) return r.Bad(where, "should be an object");
      ManifestNode node;
      KWATT_RETURN_IF_ERROR(r.String(entry, "node", where, true, &node.node));
      KWATT_RETURN_IF_ERROR(r.String(entry, "uid", where, false, &node.uid));
      KWATT_RETURN_IF_ERROR(r.String(entry, "site", where, false, &node.site));
      KWATT_RETURN_IF_ERROR(r.String(entry, "cluster", where, false, &node.cluster));
      KWATT_RETURN_IF_ERROR(r.String(entry, "file", where, false, &node.file));
      if (node.uid.empty()) node.uid = node.node.substr(0, node.node.find('.'));
      if (node.site.empty()) node.site = SiteOfFqdn(node.node);
      if (node.file.empty()) node.file = NodeFileName(node.node);
      if (!IsDataPath(node.file)) {
        return r.Bad(where + ".file",
                     "is not a data file name (data/<name>.jsonl.zst): " + node.file);
      }
      m->nodes.push_back(std::move(node));
    }
  } else if (m->complete) {
    return r.Bad("the manifest", "lacks \"nodes\"");
  }
  return Status::OK();
}

// "hardware" (optional; absent in archives written before it): each cluster's hardware as the
// reference names it, by "site/cluster", every one of them a cluster of "catalogue".
Status ParseHardware(const ManifestReader& r, const Json& root, const Json* catalogue,
                     std::map<std::string, std::string>* models) {
  const Json* hardware = r.Member(root, "hardware");
  if (hardware == nullptr) return Status::OK();
  if (!hardware->is_object()) return r.Bad("\"hardware\"", "should be an object");
  for (auto it = hardware->begin(); it != hardware->end(); ++it) {
    std::string where = "hardware " + it.key();
    if (!it.value().is_object()) return r.Bad(where, "should be an object");
    if (catalogue == nullptr || !catalogue->contains(it.key())) {
      return r.Bad(where, "names a cluster that \"catalogue\" lacks");
    }
    KWATT_RETURN_IF_ERROR(r.String(it.value(), "model", where, false, &(*models)[it.key()]));
  }
  return Status::OK();
}

// "catalogue" (each cluster's metric catalogue, with its "hardware") and "fetch" (the fetch's
// figures).
Status ParseCatalogueAndFetch(const ManifestReader& r, const Json& root, Manifest* m) {
  const Json* catalogue = r.Member(root, "catalogue");
  if (catalogue != nullptr && !catalogue->is_object()) {
    return r.Bad("\"catalogue\"", "should be an object");
  }
  std::map<std::string, std::string> models;
  KWATT_RETURN_IF_ERROR(ParseHardware(r, root, catalogue, &models));
  if (catalogue != nullptr) {
    for (auto it = catalogue->begin(); it != catalogue->end(); ++it) {
      // Read as the reference's cluster object: its metrics, and its model when the manifest
      // keeps one.
      Json cluster = {{"metrics", it.value()}};
      if (auto model = models.find(it.key()); model != models.end() && !model->second.empty()) {
        cluster["model"] = model->second;
      }
      Result<Catalogue> parsed =
          Catalogue::FromJson(cluster.dump(-1, ' ', false, Json::error_handler_t::replace));
      if (!parsed.ok()) return r.Bad("catalogue " + it.key() + ":", parsed.status().message());
      m->catalogue.push_back({it.key(), std::move(*parsed)});
    }
  }

  if (const Json* fetch = r.Member(root, "fetch")) {
    if (!fetch->is_object()) return r.Bad("\"fetch\"", "should be an object");
    Manifest::Fetch f;
    KWATT_RETURN_IF_ERROR(r.Count(*fetch, "requests", "fetch", false, &f.requests));
    KWATT_RETURN_IF_ERROR(r.Count(*fetch, "retries", "fetch", false, &f.retries));
    KWATT_RETURN_IF_ERROR(r.Count(*fetch, "splits", "fetch", false, &f.splits));
    if (const Json* seconds = r.Member(*fetch, "seconds")) {
      if (!seconds->is_number()) return r.Bad("fetch.seconds", "should be a number");
      f.seconds = seconds->get<double>();
    }
    m->fetch = f;
  }
  return Status::OK();
}

// The files: the manifest's list once complete; else what the journal says is committed,
// the nodes' files first.
Status ListFiles(const ManifestReader& r, const Json& root, const std::string* journal_text,
                 Manifest* m) {
  m->has_journal = journal_text != nullptr;
  const std::string no_journal;
  const std::string& journal = journal_text != nullptr ? *journal_text : no_journal;

  std::map<std::string, std::string> site_of_node;
  for (const ManifestNode& node : m->nodes) site_of_node[node.node] = node.site;
  auto set_site = [&](ManifestFile* file) {
    if (!file->node.empty()) {
      auto it = site_of_node.find(file->node);
      file->site = it != site_of_node.end() ? it->second : SiteOfFqdn(file->node);
    } else {
      file->site = SiteOfOtherFile(file->path);
    }
  };

  if (m->complete) {
    const Json* files = r.Member(root, "files");
    if (files == nullptr) return r.Bad("the manifest", "lacks \"files\"");
    if (!files->is_array()) return r.Bad("\"files\"", "should be an array");
    std::set<std::string> seen;
    for (size_t i = 0; i < files->size(); ++i) {
      ManifestFile file;
      KWATT_RETURN_IF_ERROR(
          ParseManifestFile(r, (*files)[i], "files[" + std::to_string(i) + "]", &file));
      if (!seen.insert(file.path).second) {
        return r.Bad("files[" + std::to_string(i) + "]", "repeats the file " + file.path);
      }
      set_site(&file);
      m->files.push_back(std::move(file));
    }
  } else {
    // What is committed: the journal's last record of each file; the nodes' files first.
    std::vector<JournalRecord> records = ParseJournal(journal);
    std::map<std::string, const JournalRecord*> by_path;
    for (const JournalRecord& record : records) by_path[record.path] = &record;
    std::set<std::string> listed;
    auto add = [&](const std::string& path, const std::string& node) {
      if (!listed.insert(path).second) return;
      ManifestFile file;
      auto it = by_path.find(path);
      if (it != by_path.end()) {
        const JournalRecord& record = *it->second;
        file.rows = record.rows;
        file.bytes = record.bytes;
        file.frames = record.frames;
        file.first = record.first;
        file.last = record.last;
        file.metrics = record.metrics;
      }
      file.path = path;
      file.node = node;
      if (node.empty() && SiteOfOtherFile(path).empty()) {
        // A node file the journal names that the manifest's nodes do not: keep its FQDN.
        file.node = path.substr(kDataDir.size() + 1,
                                path.size() - kDataDir.size() - 1 - kDataSuffix.size());
      }
      set_site(&file);
      m->files.push_back(std::move(file));
    };
    for (const ManifestNode& node : m->nodes) add(node.file, node.node);
    for (const JournalRecord& record : records) add(record.path, "");
  }
  return Status::OK();
}

}  // namespace

Result<Manifest> ParseManifest(const std::string& dir, std::string_view text,
                               const std::string* journal_text) {
  std::string file = (fs::path(dir) / kManifestName).string();
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    // parse_error, and out_of_range for a number such as 1e400.
    std::string what = e.what();
    size_t bracket = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] "
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    return Status::Corruption(file + " is not valid JSON (" + what + "); " + kManifestDamaged);
  }
  ManifestReader r(file);
  if (!root.is_object()) return r.Bad("its content", "should be a JSON object");
  std::string format;
  const Json* format_value = r.Member(root, "format");
  if (format_value == nullptr || !format_value->is_string() ||
      format_value->get<std::string>() != kFormatName) {
    return Status::Corruption(file + " is not the manifest of a kwatt archive (its \"format\" is " +
                              (format_value ? format_value->dump() : std::string("missing")) +
                              ", not \"" + std::string(kFormatName) + "\"): " + dir +
                              " holds something else");
  }
  Manifest m;
  m.dir = dir;
  const Json* version = r.Member(root, "format_version");
  if (version == nullptr || !version->is_number_integer()) {
    return r.Bad("\"format_version\"", "is missing or not an integer");
  }
  if (version->get<int64_t>() != kFormatVersion) {
    return Status::Corruption(file + ": format_version " + version->dump() + ": this kwatt reads " +
                              "version " + std::to_string(kFormatVersion) +
                              " only; read this archive with the kwatt version that wrote it "
                              "or a newer one");
  }
  m.format_version = kFormatVersion;
  KWATT_RETURN_IF_ERROR(r.String(root, "kwatt_version", "", false, &m.kwatt_version));
  std::string state;
  KWATT_RETURN_IF_ERROR(r.String(root, "state", "the manifest", true, &state));
  if (state != kStateComplete && state != kStateIncomplete) {
    return r.Bad("\"state\"", "should be \"complete\" or \"incomplete\", not \"" + state + "\"");
  }
  m.complete = state == kStateComplete;
  KWATT_RETURN_IF_ERROR(r.String(root, "created_at", "", false, &m.created_at));
  KWATT_RETURN_IF_ERROR(r.String(root, "completed_at", "", false, &m.completed_at));

  KWATT_RETURN_IF_ERROR(ParseQuery(r, root, &m));

  KWATT_RETURN_IF_ERROR(ParseWindow(r, root, &m));
  KWATT_RETURN_IF_ERROR(r.StringList(root, "sites", "", &m.sites));
  KWATT_RETURN_IF_ERROR(r.StringList(root, "job_types", "", &m.job_types));
  KWATT_RETURN_IF_ERROR(ParseJob(r, root, &m));

  KWATT_RETURN_IF_ERROR(ParseNodes(r, root, &m));

  KWATT_RETURN_IF_ERROR(ParseCatalogueAndFetch(r, root, &m));

  KWATT_RETURN_IF_ERROR(ListFiles(r, root, journal_text, &m));
  KWATT_RETURN_IF_ERROR(CheckConsistency(r, m));
  return m;
}

}  // namespace kwatt::archive
