#include "kwatt/meter/powerapi/hwpc.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "kwatt/core/json_text.h"
#include "kwatt/core/json_words.h"
#include "kwatt/core/text.h"
#include "kwatt/core/time.h"

namespace kwatt::meter {

int64_t HwpcCpuCounters::Get(std::string_view event) const {
  auto it = std::lower_bound(events.begin(), events.end(), event,
                             [](const auto& e, std::string_view name) { return e.first < name; });
  return it != events.end() && it->first == event ? it->second : -1;
}

Status HwpcReport::Normalize() {
  auto key = [](const HwpcCpuCounters& c) { return std::tie(c.group, c.socket, c.cpu); };
  std::sort(counters.begin(), counters.end(),
            [&](const HwpcCpuCounters& a, const HwpcCpuCounters& b) { return key(a) < key(b); });
  for (size_t i = 0; i < counters.size(); ++i) {
    HwpcCpuCounters& c = counters[i];
    if (i > 0 && key(counters[i - 1]) == key(c)) {
      return Status::InvalidArgument("group " + c.group + ", socket " + std::to_string(c.socket) +
                                     ", cpu " + std::to_string(c.cpu) + " given twice");
    }
    std::sort(c.events.begin(), c.events.end());
    for (size_t e = 1; e < c.events.size(); ++e) {
      if (c.events[e - 1].first == c.events[e].first) {
        return Status::InvalidArgument("event " + c.events[e].first + " given twice in group " +
                                       c.group + ", socket " + std::to_string(c.socket) + ", cpu " +
                                       std::to_string(c.cpu));
      }
    }
  }
  return Status::OK();
}

namespace {

// A count as hwpc-sensor writes it: a non-negative integer (CSV), or a JSON number whose value is
// one.
bool ParseCount(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size() && *out >= 0;
}

bool ParseId(std::string_view text, int* out) {
  if (text.empty() || text.size() > 9) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size() && *out >= 0;
}

// hwpc-sensor's timestamp: milliseconds since the epoch, or ISO text (its socket output writes
// "%Y-%m-%dT%H:%M:%S.mmm" in the sensor's local time, which PowerAPI reads as local time too).
Status ParseTimestampText(std::string_view text, int64_t* ms) {
  int64_t value = 0;
  if (ParseCount(text, &value)) {
    if (value > int64_t(9.2e15)) return Status::InvalidArgument("timestamp out of range");
    *ms = value;
    return Status::OK();
  }
  Result<ParsedTime> parsed = ParseIsoTimestamp(text);
  if (!parsed.ok()) {
    return Status::InvalidArgument("timestamp \"" + std::string(text) +
                                   "\" is neither milliseconds since the epoch nor ISO 8601");
  }
  UnixNanos utc = parsed->utc;
  if (!parsed->offset_seconds) {
    Result<UnixNanos> local = LocalToUtc(parsed->utc);
    if (!local.ok()) return local.status();
    utc = *local;
  }
  *ms = FloorDiv(utc, 1000000);
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// CSV directory.

// Splits one CSV line into fields (RFC 4180 quoting, as Python's csv module reads it).
// Splits one CSV line into fields (RFC 4180 quoting, as Python's csv module reads it). The
// strings of `fields` are reused (assigned, not rebuilt), so that a file's lines allocate nothing.
bool SplitCsvLine(std::string_view line, std::vector<std::string>* fields) {
  size_t count = 0;
  auto next = [&]() -> std::string& {
    if (count == fields->size()) fields->emplace_back();
    std::string& field = (*fields)[count++];
    field.clear();
    return field;
  };
  size_t i = 0;
  while (true) {
    std::string& field = next();
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) return false;  // unterminated quote
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      if (i < line.size() && line[i] != ',') return false;
    } else {
      size_t comma = line.find(',', i);
      size_t end = comma == std::string_view::npos ? line.size() : comma;
      field.assign(line.substr(i, end - i));
      i = end;
    }
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  fields->resize(count);
  return true;
}

struct CsvRow {
  int64_t timestamp_ms = 0;
  std::string sensor, target;
  int socket = 0, cpu = 0;
  std::vector<int64_t> values;  // per the file's events
  int64_t line = 0;
};

class CsvGroupFile {
 public:
  CsvGroupFile(std::string path, std::string group) : path_(std::move(path)), group_(group) {}
  ~CsvGroupFile() {
    if (file_) std::fclose(file_);
  }

  Status Open() {
    file_ = std::fopen(path_.c_str(), "rb");
    if (!file_) return Status::IOError(path_ + ": " + std::strerror(errno));
    std::string header;
    bool got = false;
    KWATT_RETURN_IF_ERROR(ReadLine(&header, &got));
    if (!got) return Status::Corruption(path_ + ": empty file (no header line)");
    std::vector<std::string> fields;
    if (!SplitCsvLine(header, &fields)) {
      return Status::Corruption(Where() + ": malformed header (an unterminated quote)");
    }
    int* slots[5] = {&timestamp_, &sensor_, &target_, &socket_, &cpu_};
    const char* names[5] = {"timestamp", "sensor", "target", "socket", "cpu"};
    for (size_t i = 0; i < fields.size(); ++i) {
      bool fixed = false;
      for (int k = 0; k < 5; ++k) {
        if (fields[i] == names[k]) {
          if (*slots[k] >= 0) {
            return Status::Corruption(Where() + ": column " + fields[i] + " given twice");
          }
          *slots[k] = int(i);
          fixed = true;
        }
      }
      if (!fixed) {
        if (fields[i].empty()) return Status::Corruption(Where() + ": an empty column name");
        for (const auto& e : events_) {
          if (e.first == fields[i]) {
            return Status::Corruption(Where() + ": column " + fields[i] + " given twice");
          }
        }
        events_.emplace_back(fields[i], i);
      }
    }
    for (int k = 0; k < 5; ++k) {
      if (*slots[k] < 0) {
        return Status::Corruption(
            Where() + ": the header has no column " + names[k] +
            " (hwpc-sensor writes timestamp,sensor,target,socket,cpu,EVENT...)");
      }
    }
    columns_ = fields.size();
    // Events sorted by name, the order reports keep them in.
    order_.resize(events_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    std::sort(order_.begin(), order_.end(),
              [&](size_t a, size_t b) { return events_[a].first < events_[b].first; });
    return Advance();
  }

  // The next row, read ahead; nullptr at the end.
  const CsvRow* head() const { return has_head_ ? &head_ : nullptr; }
  const std::string& group() const { return group_; }
  const std::string& path() const { return path_; }

  // Adds the head row to `counters` and reads the next.
  Status TakeHead(HwpcCpuCounters* counters) {
    counters->group = group_;
    counters->socket = head_.socket;
    counters->cpu = head_.cpu;
    counters->events.clear();
    counters->events.reserve(events_.size());
    for (size_t k : order_) counters->events.emplace_back(events_[k].first, head_.values[k]);
    return Advance();
  }

  std::string Where() const { return path_ + ":" + std::to_string(line_); }

 private:
  Status ReadLine(std::string* out, bool* got) {
    out->clear();
    *got = false;
    while (true) {
      if (buffer_at_ >= buffer_end_) {
        if (eof_) break;
        buffer_at_ = 0;
        buffer_end_ = std::fread(buffer_, 1, sizeof buffer_, file_);
        if (buffer_end_ == 0) {
          if (std::ferror(file_)) return Status::IOError(path_ + ": read failed");
          eof_ = true;
          break;
        }
      }
      *got = true;
      const char* start = buffer_ + buffer_at_;
      const char* newline =
          static_cast<const char*>(std::memchr(start, '\n', buffer_end_ - buffer_at_));
      size_t n = newline ? size_t(newline - start) : buffer_end_ - buffer_at_;
      out->append(start, n);
      buffer_at_ += n + (newline ? 1 : 0);
      if (out->size() > (1u << 20)) {
        return Status::Corruption(path_ + ":" + std::to_string(line_ + 1) +
                                  ": a line longer than 1 MiB");
      }
      if (newline) break;
    }
    if (*got) ++line_;
    if (!out->empty() && out->back() == '\r') out->pop_back();
    return Status::OK();
  }

  Status Advance() {
    has_head_ = false;
    std::string& line = line_text_;
    bool got = false;
    while (true) {
      KWATT_RETURN_IF_ERROR(ReadLine(&line, &got));
      if (!got) return Status::OK();
      if (!line.empty()) break;  // blank lines (a trailing one) are skipped
    }
    if (!SplitCsvLine(line, &fields_)) {
      return Status::Corruption(Where() + ": malformed line (an unterminated quote)");
    }
    if (fields_.size() != columns_) {
      return Status::Corruption(Where() + ": " + std::to_string(fields_.size()) +
                                " fields where the header has " + std::to_string(columns_));
    }
    for (size_t i = 0; i < fields_.size(); ++i) {
      if (fields_[i].empty()) {
        return Status::Corruption(Where() + ": field " + ColumnName(i) +
                                  " is empty (an incomplete line; PowerAPI refuses it too)");
      }
    }
    CsvRow& row = head_;  // parsed in place: its buffers are kept from line to line
    row.line = line_;
    Status t = ParseTimestampText(fields_[timestamp_], &row.timestamp_ms);
    if (!t.ok()) return Status::Corruption(Where() + ": " + t.message());
    row.sensor = fields_[sensor_];
    row.target = fields_[target_];
    if (!ParseId(fields_[socket_], &row.socket)) {
      return Status::Corruption(Where() + ": socket \"" + fields_[socket_] +
                                "\" is not a socket number");
    }
    if (!ParseId(fields_[cpu_], &row.cpu)) {
      return Status::Corruption(Where() + ": cpu \"" + fields_[cpu_] + "\" is not a CPU number");
    }
    row.values.resize(events_.size());
    for (size_t k = 0; k < events_.size(); ++k) {
      const std::string& text = fields_[events_[k].second];
      if (!ParseCount(text, &row.values[k])) {
        return Status::Corruption(Where() + ": " + events_[k].first + " \"" + text +
                                  "\" is not a count (a non-negative integer)");
      }
    }
    if (has_previous_ && row.timestamp_ms < previous_timestamp_) {
      return Status::Corruption(Where() + ": timestamp " + std::to_string(row.timestamp_ms) +
                                " goes back (the line before has " +
                                std::to_string(previous_timestamp_) +
                                "); hwpc-sensor writes its lines in time order");
    }
    has_previous_ = true;
    previous_timestamp_ = row.timestamp_ms;
    has_head_ = true;
    return Status::OK();
  }

  std::string ColumnName(size_t i) const {
    const char* names[5] = {"timestamp", "sensor", "target", "socket", "cpu"};
    int fixed[5] = {timestamp_, sensor_, target_, socket_, cpu_};
    for (int k = 0; k < 5; ++k) {
      if (fixed[k] == int(i)) return names[k];
    }
    for (const auto& e : events_) {
      if (e.second == i) return e.first;
    }
    return std::to_string(i + 1);
  }

  std::string path_, group_;
  std::FILE* file_ = nullptr;
  char buffer_[1 << 16];
  size_t buffer_at_ = 0, buffer_end_ = 0;
  bool eof_ = false;
  std::string line_text_;
  int64_t line_ = 0;
  int timestamp_ = -1, sensor_ = -1, target_ = -1, socket_ = -1, cpu_ = -1;
  size_t columns_ = 0;
  std::vector<std::pair<std::string, size_t>> events_;  // name, column
  std::vector<size_t> order_;                           // events_ indices sorted by name
  std::vector<std::string> fields_;
  CsvRow head_;
  bool has_head_ = false, has_previous_ = false;
  int64_t previous_timestamp_ = 0;
};

class CsvDirectoryReader : public HwpcReader {
 public:
  Status Open(const std::string& directory) {
    DIR* dir = ::opendir(directory.c_str());
    if (!dir) {
      if (errno == ENOENT) return Status::NotFound(directory + ": no such directory");
      return Status::IOError(directory + ": " + std::strerror(errno));
    }
    std::vector<std::pair<std::string, std::string>> found;  // group, path
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name.empty() || name[0] == '.') continue;
      std::string group;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".csv") == 0) {
        group = name.substr(0, name.size() - 4);
      } else if (name.find('.') == std::string::npos) {
        group = name;  // hwpc-sensor's own naming: the group, no extension
      } else {
        continue;
      }
      std::string path = directory + "/" + name;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      found.emplace_back(group, path);
    }
    ::closedir(dir);
    std::sort(found.begin(), found.end());
    for (size_t i = 1; i < found.size(); ++i) {
      if (found[i].first == found[i - 1].first) {
        return Status::InvalidArgument(directory + ": two files for group " + found[i].first +
                                       " (" + found[i - 1].second + " and " + found[i].second +
                                       ")");
      }
    }
    if (found.empty()) {
      return Status::NotFound(directory +
                              ": no hwpc-sensor CSV file (GROUP.csv, or GROUP as hwpc-sensor "
                              "names them: rapl, msr, core)");
    }
    for (auto& [group, path] : found) {
      auto file = std::make_unique<CsvGroupFile>(path, group);
      KWATT_RETURN_IF_ERROR(file->Open());
      files_.push_back(std::move(file));
    }
    return Status::OK();
  }

  Result<bool> Next(HwpcReport* report) override {
    if (next_ >= tick_.size()) {
      KWATT_RETURN_IF_ERROR(ReadTick());
      if (tick_.empty()) return false;
    }
    *report = std::move(tick_[next_++]);
    return true;
  }

 private:
  // Every line of the earliest timestamp left, from every file, grouped by target.
  Status ReadTick() {
    tick_.clear();
    next_ = 0;
    bool any = false;
    int64_t t = 0;
    for (const auto& f : files_) {
      if (const CsvRow* row = f->head()) {
        if (!any || row->timestamp_ms < t) t = row->timestamp_ms;
        any = true;
      }
    }
    if (!any) return Status::OK();
    std::map<std::string, size_t> by_target;
    for (const auto& f : files_) {
      while (const CsvRow* row = f->head()) {
        if (row->timestamp_ms != t) break;
        auto [it, inserted] = by_target.emplace(row->target, tick_.size());
        if (inserted) {
          HwpcReport r;
          r.timestamp_ms = t;
          r.sensor = row->sensor;
          r.target = row->target;
          tick_.push_back(std::move(r));
        } else if (tick_[it->second].sensor != row->sensor) {
          return Status::Corruption(f->Where() + ": sensor " + row->sensor + " where line " +
                                    "of the same tick and target have " + tick_[it->second].sensor);
        }
        std::string where = f->Where();
        HwpcReport& r = tick_[it->second];
        r.counters.emplace_back();
        KWATT_RETURN_IF_ERROR(f->TakeHead(&r.counters.back()));
        (void)where;
      }
    }
    for (HwpcReport& r : tick_) {
      Status normal = r.Normalize();
      if (!normal.ok()) {
        return Status::Corruption("tick " + std::to_string(t) + ", target " + r.target + ": " +
                                  normal.message());
      }
    }
    return Status::OK();
  }

  std::vector<std::unique_ptr<CsvGroupFile>> files_;
  std::vector<HwpcReport> tick_;
  size_t next_ = 0;
};

// ---------------------------------------------------------------------------------------------
// JSON.

using nlohmann::json;

std::string Describe(const json& value) {
  return kwatt::internal::JsonTypeName(value, kwatt::internal::FileSyntax::kJson);
}

bool JsonCount(const json& value, int64_t* out) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > uint64_t(INT64_MAX)) return false;
    *out = int64_t(v);
    return true;
  }
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return *out >= 0;
  }
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (!(d >= 0) || d >= 9.2e18 || std::floor(d) != d) return false;
    *out = int64_t(d);
    return true;
  }
  return false;
}

}  // namespace

Status ParseHwpcJson(std::string_view document, std::string_view where, HwpcReport* report) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption(std::string(where) + ": " + what);
  };
  json doc = json::parse(document.begin(), document.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad("not a JSON document");
  if (!doc.is_object()) return bad("a report is a JSON object, not " + Describe(doc));
  report->counters.clear();
  auto ts = doc.find("timestamp");
  if (ts == doc.end()) return bad("no \"timestamp\"");
  if (ts->is_string()) {
    Status s = ParseTimestampText(ts->get_ref<const std::string&>(), &report->timestamp_ms);
    if (!s.ok()) return bad(s.message());
  } else if (!JsonCount(*ts, &report->timestamp_ms) || report->timestamp_ms > int64_t(9.2e15)) {
    return bad("\"timestamp\" is " + Describe(*ts) +
               ", not milliseconds since the epoch or ISO 8601 text");
  }
  for (const char* key : {"sensor", "target"}) {
    auto it = doc.find(key);
    if (it == doc.end()) return bad(std::string("no \"") + key + "\"");
    if (!it->is_string()) return bad(std::string("\"") + key + "\" is " + Describe(*it));
    (key[0] == 's' ? report->sensor : report->target) = it->get<std::string>();
  }
  auto groups = doc.find("groups");
  if (groups == doc.end()) return bad("no \"groups\"");
  if (!groups->is_object()) return bad("\"groups\" is " + Describe(*groups));
  for (const auto& [group, sockets] : groups->items()) {
    if (!sockets.is_object()) return bad("group " + group + " is " + Describe(sockets));
    for (const auto& [socket_text, cpus] : sockets.items()) {
      int socket = 0;
      if (!ParseId(socket_text, &socket)) {
        return bad("group " + group + ": socket \"" + socket_text + "\" is not a socket number");
      }
      if (!cpus.is_object()) {
        return bad("group " + group + ", socket " + socket_text + " is " + Describe(cpus));
      }
      for (const auto& [cpu_text, events] : cpus.items()) {
        HwpcCpuCounters counters;
        counters.group = group;
        counters.socket = socket;
        if (!ParseId(cpu_text, &counters.cpu)) {
          return bad("group " + group + ", socket " + socket_text + ": cpu \"" + cpu_text +
                     "\" is not a CPU number");
        }
        if (!events.is_object()) {
          return bad("group " + group + ", socket " + socket_text + ", cpu " + cpu_text + " is " +
                     Describe(events));
        }
        counters.events.reserve(events.size());
        for (const auto& [event, value] : events.items()) {
          int64_t count = 0;
          if (!JsonCount(value, &count)) {
            return bad("group " + group + ", socket " + socket_text + ", cpu " + cpu_text + ": " +
                       event + " is " + (value.is_number() ? value.dump() : Describe(value)) +
                       ", not a count (a non-negative integer)");
          }
          counters.events.emplace_back(event, count);
        }
        report->counters.push_back(std::move(counters));
      }
    }
  }
  Status normal = report->Normalize();
  if (!normal.ok()) return bad(normal.message());
  return Status::OK();
}

void JsonDocumentSplitter::Feed(std::string_view bytes,
                                std::vector<std::pair<std::string, int64_t>>* documents) {
  for (char c : bytes) {
    if (depth_ == 0) {
      // Between documents: white space is skipped, anything else but '{' counted as stray.
      if (c == '\n') ++line_;
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        in_stray_ = false;
        continue;
      }
      if (c != '{') {
        if (!in_stray_) {
          ++stray_runs_;
          stray_line_ = line_;
        }
        in_stray_ = true;
        continue;
      }
      in_stray_ = false;
      depth_ = 1;
      in_string_ = escaped_ = skipping_ = false;
      pending_.assign(1, c);
      start_line_ = line_;
      continue;
    }
    if (!skipping_) {
      if (pending_.size() >= max_document_bytes_) {
        skipping_ = true;
        pending_.clear();
      } else {
        pending_ += c;
      }
    }
    if (c == '\n') ++line_;
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) {
        if (skipping_) {
          ++oversized_;
        } else {
          documents->emplace_back(std::move(pending_), start_line_);
        }
        pending_.clear();
        skipping_ = false;
      }
    }
  }
}

namespace {

class JsonFileReader : public HwpcReader {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    if (path == "-") {
      file_ = stdin;
      path_ = "standard input";
      return Status::OK();
    }
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) {
      if (errno == ENOENT) return Status::NotFound(path + ": no such file");
      return Status::IOError(path + ": " + std::strerror(errno));
    }
    owned_ = true;
    return Status::OK();
  }
  ~JsonFileReader() override {
    if (owned_) std::fclose(file_);
  }

  Result<bool> Next(HwpcReport* report) override {
    while (next_ >= documents_.size()) {
      documents_.clear();
      next_ = 0;
      if (eof_) {
        if (!splitter_.Pending().empty()) {
          std::string where = path_ + ":" + std::to_string(splitter_.pending_line());
          return Status::Corruption(where + ": the input ends inside a document (truncated)");
        }
        return false;
      }
      size_t n = std::fread(buffer_, 1, sizeof buffer_, file_);
      if (n == 0) {
        if (std::ferror(file_)) return Status::IOError(path_ + ": read failed");
        eof_ = true;
        continue;
      }
      splitter_.Feed(std::string_view(buffer_, n), &documents_);
      if (splitter_.oversized() > 0) {
        return Status::Corruption(path_ + ": a document longer than 16 MiB");
      }
      if (splitter_.stray_runs() > 0) {
        return Status::Corruption(path_ + ":" + std::to_string(splitter_.stray_line()) +
                                  ": text outside a JSON object (hwpc-sensor writes one object "
                                  "per line)");
      }
    }
    const auto& [text, line] = documents_[next_++];
    KWATT_RETURN_IF_ERROR(ParseHwpcJson(text, path_ + ":" + std::to_string(line), report));
    return true;
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  bool owned_ = false, eof_ = false;
  char buffer_[1 << 16];
  JsonDocumentSplitter splitter_;
  std::vector<std::pair<std::string, int64_t>> documents_;
  size_t next_ = 0;
};

}  // namespace

Result<std::unique_ptr<HwpcReader>> OpenHwpcCsvDirectory(const std::string& directory) {
  auto reader = std::make_unique<CsvDirectoryReader>();
  KWATT_RETURN_IF_ERROR(reader->Open(directory));
  return std::unique_ptr<HwpcReader>(std::move(reader));
}

Result<std::unique_ptr<HwpcReader>> OpenHwpcJsonFile(const std::string& path) {
  auto reader = std::make_unique<JsonFileReader>();
  KWATT_RETURN_IF_ERROR(reader->Open(path));
  return std::unique_ptr<HwpcReader>(std::move(reader));
}

// ---------------------------------------------------------------------------------------------
// Writers.

std::string FormatHwpcJson(const HwpcReport& report) {
  std::string out = "{\"timestamp\":" + std::to_string(report.timestamp_ms) + ",\"sensor\":";
  AppendJsonString(&out, report.sensor);
  out += ",\"target\":";
  AppendJsonString(&out, report.target);
  out += ",\"groups\":{";
  // counters are sorted by (group, socket, cpu) once normalized; written in the order given,
  // opening a group or socket object when it changes.
  const HwpcCpuCounters* previous = nullptr;
  for (const HwpcCpuCounters& c : report.counters) {
    bool new_group = !previous || previous->group != c.group;
    bool new_socket = new_group || previous->socket != c.socket;
    if (new_group) {
      if (previous) out += "}},";
      AppendJsonString(&out, c.group);
      out += ":{";
    } else if (new_socket) {
      out += "},";
    } else {
      out += ',';
    }
    if (new_socket) out += "\"" + std::to_string(c.socket) + "\":{";
    out += "\"" + std::to_string(c.cpu) + "\":{";
    for (size_t e = 0; e < c.events.size(); ++e) {
      if (e) out += ',';
      AppendJsonString(&out, c.events[e].first);
      out += ':';
      out += std::to_string(c.events[e].second);
    }
    out += '}';
    previous = &c;
  }
  if (previous) out += "}}";
  out += "}}";
  return out;
}

struct HwpcCsvWriter::GroupFile {
  std::string group, path;
  std::FILE* file = nullptr;
  std::vector<std::string> events;
  std::string line;
};

Result<std::unique_ptr<HwpcCsvWriter>> HwpcCsvWriter::Open(const std::string& directory) {
  if (directory.empty()) return Status::InvalidArgument("an empty directory name");
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0) {
    return Status::IOError(directory + ": " + (error ? error.message() : std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(directory + " exists and is not a directory");
  }
  auto writer = std::unique_ptr<HwpcCsvWriter>(new HwpcCsvWriter());
  writer->directory_ = directory;
  return writer;
}

HwpcCsvWriter::~HwpcCsvWriter() { (void)Close(); }

Status HwpcCsvWriter::Write(const HwpcReport& report) {
  for (const std::string* text : {&report.sensor, &report.target}) {
    if (text->find_first_of("\n\r") != std::string::npos) {
      return Status::InvalidArgument("sensor or target \"" + *text + "\" holds a line break");
    }
  }
  for (const HwpcCpuCounters& c : report.counters) {
    GroupFile* file = nullptr;
    for (auto& f : files_) {
      if (f->group == c.group) file = f.get();
    }
    if (!file) {
      if (c.group.empty() ||
          c.group.find_first_of(std::string_view("/\0", 2)) != std::string::npos ||
          c.group[0] == '.') {
        return Status::InvalidArgument("group \"" + c.group + "\" cannot name a file");
      }
      auto f = std::make_unique<GroupFile>();
      f->group = c.group;
      f->path = directory_ + "/" + c.group + ".csv";
      for (const auto& e : c.events) f->events.push_back(e.first);
      std::sort(f->events.begin(), f->events.end());
      std::string header = "timestamp,sensor,target,socket,cpu";
      for (const auto& e : f->events) {
        if (e.find_first_of("\n\r") != std::string::npos) {
          return Status::InvalidArgument("event \"" + e + "\" holds a line break");
        }
        header += ',';
        AppendCsvField(&header, e);
      }
      header += '\n';
      f->file = std::fopen(f->path.c_str(), "wb");
      if (!f->file) return Status::IOError(f->path + ": " + std::strerror(errno));
      files_.push_back(std::move(f));
      file = files_.back().get();
      if (std::fwrite(header.data(), 1, header.size(), file->file) != header.size()) {
        return Status::IOError(file->path + ": write failed");
      }
    }
    if (c.events.size() != file->events.size()) {
      return Status::InvalidArgument("group " + c.group + ": " + std::to_string(c.events.size()) +
                                     " events where its file has " +
                                     std::to_string(file->events.size()));
    }
    std::string& line = file->line;
    line = std::to_string(report.timestamp_ms);
    line += ',';
    AppendCsvField(&line, report.sensor);
    line += ',';
    AppendCsvField(&line, report.target);
    line += ',';
    line += std::to_string(c.socket);
    line += ',';
    line += std::to_string(c.cpu);
    for (const std::string& event : file->events) {
      int64_t v = c.Get(event);
      if (v < 0) {
        return Status::InvalidArgument("group " + c.group + ": no " + event +
                                       " where its file's header has it");
      }
      line += ',';
      line += std::to_string(v);
    }
    line += '\n';
    if (std::fwrite(line.data(), 1, line.size(), file->file) != line.size()) {
      return Status::IOError(file->path + ": write failed");
    }
  }
  return Status::OK();
}

Status HwpcCsvWriter::Close() {
  Status status;
  for (auto& f : files_) {
    if (f->file && std::fclose(f->file) != 0 && status.ok()) {
      status = Status::IOError(f->path + ": write failed");
    }
    f->file = nullptr;
  }
  return status;
}

}  // namespace kwatt::meter
