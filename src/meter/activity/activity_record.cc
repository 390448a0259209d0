// The activity record (include/kwatt/meter/activity/activity_record.h; format: doc/meter/running.md
// "The activity record").
#include "kwatt/meter/activity/activity_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "kwatt/core/json_text.h"
#include "src/meter/activity/activity_procfs.h"

namespace kwatt::meter {

using nlohmann::json;

namespace {

// A hardware count is -1 when it could not be read (then or from then on): only two counts
// both read can go back.
bool WentBack(int64_t before, int64_t now) { return before >= 0 && now >= 0 && now < before; }

void AppendInt(std::string* out, int64_t value) {
  char digits[24];
  auto [end, error] = std::to_chars(digits, digits + sizeof digits, value);
  out->append(digits, end);
}

std::string FirstLine(const MeterEnvironment& environment, const char* relative) {
  std::string text;
  if (procfs::ReadWholeFile(AT_FDCWD, (environment.procfs_root + "/" + relative).c_str(), &text) !=
      0) {
    return "";
  }
  return text.substr(0, text.find('\n'));
}

std::optional<TargetKind> KindFromName(const std::string& name) {
  for (TargetKind kind : {TargetKind::kProcess, TargetKind::kProcessTree, TargetKind::kCgroup}) {
    if (name == TargetKindName(kind)) return kind;
  }
  return std::nullopt;
}

}  // namespace

ActivityRecordHeader MakeActivityRecordHeader(const MeterEnvironment& environment,
                                              const TargetSelection& selection,
                                              const std::string& writer) {
  ActivityRecordHeader header;
  header.writer = writer;
  header.host = HostName(environment);
  header.boot_id = FirstLine(environment, "sys/kernel/random/boot_id");
  header.kernel = FirstLine(environment, "sys/kernel/osrelease");
  header.clock_ticks = procfs::ClockTicksPerSecond();
  std::string online;
  if (procfs::ReadWholeFile(AT_FDCWD,
                            (environment.sysfs_root + "/devices/system/cpu/online").c_str(),
                            &online) == 0) {
    auto cpus = procfs::ParseCpuList(online);
    if (cpus.ok()) header.cpus = int(cpus->size());
  }
  header.start = environment.clock->WallNanos();
  header.selection = selection;
  return header;
}

// ---------------------------------------------------------------------------------------------
// Writer

struct ActivityRecordWriter::Known {
  struct Target {
    int64_t id;
    int64_t cpu;
    int64_t cycles;
    int64_t instructions;
  };
  std::unordered_map<std::string, Target> by_key;
};

ActivityRecordWriter::ActivityRecordWriter(int fd, bool owned, std::string path)
    : fd_(fd), owned_(owned), path_(std::move(path)), known_(std::make_unique<Known>()) {}

ActivityRecordWriter::~ActivityRecordWriter() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<ActivityRecordWriter>> ActivityRecordWriter::Create(
    const std::string& path, const ActivityRecordHeader& header) {
  if (path.empty()) {
    return Status::InvalidArgument(
        "the activity record's file name is empty: give a path (or - for standard output)");
  }
  int fd = 1;
  bool owned = false;
  if (path != "-") {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      int error = errno;
      if (error == EISDIR) {
        return Status::InvalidArgument(path + " is a directory: give the path of a file to write");
      }
      return Status::IOError("cannot write the activity record " + path + ": " +
                             std::strerror(error));
    }
    owned = true;
  }
  std::unique_ptr<ActivityRecordWriter> writer(new ActivityRecordWriter(fd, owned, path));
  writer->counters_ = header.selection.hardware_counters;
  json selection = {{"pids", header.selection.pids},
                    {"trees", header.selection.trees},
                    {"cgroups", header.selection.cgroups},
                    {"commands", header.selection.commands},
                    {"all_processes", header.selection.all_processes},
                    {"cgroup_depth", header.selection.cgroup_depth},
                    {"hardware_counters", header.selection.hardware_counters}};
  // The header's keys in a fixed order, for people reading the file.
  nlohmann::ordered_json line;
  line["format"] = kActivityRecordFormat;
  line["version"] = kActivityRecordVersion;
  line["writer"] = header.writer;
  line["host"] = header.host;
  line["boot_id"] = header.boot_id;
  line["kernel"] = header.kernel;
  line["clock_ticks"] = header.clock_ticks;
  line["cpus"] = header.cpus;
  line["start_ns"] = header.start;
  line["start"] = FormatUtcTimestamp(header.start);
  line["selection"] = selection;
  KWATT_RETURN_IF_ERROR(
      writer->Append(line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"));
  return writer;
}

Status ActivityRecordWriter::Append(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("writing the activity record " + path_ +
                             " failed: " + std::strerror(errno));
    }
    done += size_t(n);
  }
  return Status::OK();
}

Status ActivityRecordWriter::Write(const ActivitySnapshot& snapshot) {
  if (finished_) return Status::Internal("activity record written after Finish");
  // Check first: nothing of a refused snapshot is written.
  std::unordered_map<std::string_view, int> seen;
  for (const TargetSample& t : snapshot.targets) {
    if (!seen.emplace(t.target.key, 0).second) {
      return Status::InvalidArgument("target " + t.target.key +
                                     " is twice in one snapshot: keys are unique");
    }
    auto it = known_->by_key.find(t.target.key);
    if (it != known_->by_key.end() &&
        (t.cpu_microseconds < it->second.cpu || WentBack(it->second.cycles, t.cycles) ||
         WentBack(it->second.instructions, t.instructions))) {
      return Status::InvalidArgument("target " + t.target.key +
                                     "'s counters went back: they are cumulative");
    }
  }
  line_.clear();
  // Definitions of the targets new to the record.
  for (const TargetSample& t : snapshot.targets) {
    if (known_->by_key.count(t.target.key)) continue;
    int64_t id = next_id_++;
    line_ += "{\"target\":";
    AppendInt(&line_, id);
    line_ += ",\"key\":";
    AppendJsonString(&line_, t.target.key);
    line_ += ",\"kind\":\"";
    line_ += TargetKindName(t.target.kind);
    line_ += "\",\"name\":";
    AppendJsonString(&line_, t.target.name);
    line_ += ",\"pid\":";
    AppendInt(&line_, t.target.pid);
    line_ += "}\n";
    known_->by_key.emplace(t.target.key, Known::Target{id, -1, -1, -1});
  }
  // The snapshot: the machine, the targets that moved or are new, the ids that ended.
  line_ += "{\"time_ns\":";
  AppendInt(&line_, snapshot.wall);
  line_ += ",\"time\":\"";
  line_ += FormatUtcTimestamp(snapshot.wall);
  line_ += "\",\"monotonic_ns\":";
  AppendInt(&line_, snapshot.monotonic_nanos);
  line_ += ",\"cpus\":";
  AppendInt(&line_, snapshot.cpus);
  line_ += ",\"busy_us\":";
  AppendInt(&line_, snapshot.busy_microseconds);
  line_ += ",\"total_us\":";
  AppendInt(&line_, snapshot.total_microseconds);
  line_ += ",\"targets\":[";
  bool first = true;
  for (const TargetSample& t : snapshot.targets) {
    Known::Target& known = known_->by_key[t.target.key];
    bool moved = known.cpu != t.cpu_microseconds ||
                 (counters_ && (known.cycles != t.cycles || known.instructions != t.instructions));
    if (!moved) continue;
    known.cpu = t.cpu_microseconds;
    known.cycles = t.cycles;
    known.instructions = t.instructions;
    if (!first) line_ += ',';
    first = false;
    line_ += '[';
    AppendInt(&line_, known.id);
    line_ += ',';
    AppendInt(&line_, t.cpu_microseconds);
    if (counters_) {
      line_ += ',';
      AppendInt(&line_, t.cycles);
      line_ += ',';
      AppendInt(&line_, t.instructions);
    }
    line_ += ']';
  }
  line_ += "],\"ended\":[";
  first = true;
  for (auto it = known_->by_key.begin(); it != known_->by_key.end();) {
    if (seen.count(it->first)) {
      ++it;
      continue;
    }
    if (!first) line_ += ',';
    first = false;
    AppendInt(&line_, it->second.id);
    it = known_->by_key.erase(it);
  }
  line_ += "]}\n";
  ++snapshots_;
  return Append(line_);
}

Status ActivityRecordWriter::Finish() {
  if (finished_) return Status::OK();
  finished_ = true;
  std::string end = "{\"end\":{\"snapshots\":";
  AppendInt(&end, snapshots_);
  end += "}}\n";
  Status status = Append(end);
  if (owned_) {
    if (status.ok() && ::fsync(fd_) != 0) {
      status = Status::IOError("syncing the activity record " + path_ +
                               " failed: " + std::strerror(errno));
    }
    if (::close(fd_) != 0 && status.ok()) {
      status = Status::IOError("closing the activity record " + path_ +
                               " failed: " + std::strerror(errno));
    }
    fd_ = -1;
  }
  return status;
}

// ---------------------------------------------------------------------------------------------
// Reader

struct ActivityRecordReader::State {
  std::string path;
  std::ifstream in;
  int64_t line_number = 0;
  ActivityRecordHeader header;
  bool ended = false;      // the end line was read
  bool exhausted = false;  // Next gave nullopt
  bool truncated = false;
  int64_t last_monotonic = INT64_MIN;
  int64_t last_time = INT64_MIN;
  int counters_width = 2;
  std::unordered_map<int64_t, std::string> key_of;    // target id -> key, for every id defined
  std::unordered_map<int64_t, bool> live;             // ids in use now
  std::map<std::string, TargetSample> by_key;         // the targets alive, with their counters
  std::unordered_map<int64_t, TargetSample> pending;  // defined, not yet in a snapshot

  Status Bad(const std::string& what) const {
    return Status::Corruption(path + " line " + std::to_string(line_number) + ": " + what);
  }
  // The next whole line; false at the end (a last line without its newline is not whole).
  bool NextLine(std::string* line) {
    if (!std::getline(in, *line)) return false;
    ++line_number;
    if (in.eof()) {  // no newline after it: a writer was interrupted within it
      truncated = !line->empty();
      return false;
    }
    return true;
  }
};

namespace {

bool GetInt(const json& object, const char* key, int64_t* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)) return false;
  *out = it->get<int64_t>();
  return true;
}

bool GetString(const json& object, const char* key, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

bool GetBool(const json& object, const char* key, bool* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

}  // namespace

ActivityRecordReader::ActivityRecordReader(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
ActivityRecordReader::~ActivityRecordReader() = default;

const ActivityRecordHeader& ActivityRecordReader::header() const { return state_->header; }
bool ActivityRecordReader::complete() const { return state_->exhausted && state_->ended; }
bool ActivityRecordReader::truncated() const { return state_->exhausted && state_->truncated; }

Result<std::unique_ptr<ActivityRecordReader>> ActivityRecordReader::Open(const std::string& path) {
  auto state = std::make_unique<State>();
  state->path = path;
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return procfs::FileError(errno, "the activity record " + path);
  }
  if (S_ISDIR(info.st_mode)) {
    return Status::InvalidArgument(path + " is a directory, not an activity record");
  }
  state->in.open(path, std::ios::binary);
  if (!state->in) return Status::IOError("cannot read the activity record " + path);
  std::string line;
  if (!state->NextLine(&line)) {
    state->line_number = 1;
    return state->Bad("no header line: not an activity record (kwatt meter record writes them)");
  }
  json header = json::parse(line, nullptr, false);
  std::string format;
  if (header.is_discarded() || !header.is_object() || !GetString(header, "format", &format) ||
      format != kActivityRecordFormat) {
    return state->Bad(std::string("not an activity record: its first line has no \"format\": \"") +
                      kActivityRecordFormat + "\"");
  }
  int64_t version = 0;
  if (!GetInt(header, "version", &version) || version < 1) {
    return state->Bad("the header has no version");
  }
  if (version > kActivityRecordVersion) {
    return Status::InvalidArgument(
        path + " is an activity record of version " + std::to_string(version) +
        ", written by a newer kwatt; this one "
        "reads version " +
        std::to_string(kActivityRecordVersion) + ": upgrade kwatt to read it");
  }
  ActivityRecordHeader& h = state->header;
  int64_t cpus = 0;
  bool ok = GetString(header, "writer", &h.writer) && GetString(header, "host", &h.host) &&
            GetString(header, "boot_id", &h.boot_id) && GetString(header, "kernel", &h.kernel) &&
            GetInt(header, "clock_ticks", &h.clock_ticks) && h.clock_ticks > 0 &&
            GetInt(header, "cpus", &cpus) && cpus >= 0 && cpus < (1 << 20) &&
            GetInt(header, "start_ns", &h.start);
  h.cpus = int(cpus);
  auto selection = header.find("selection");
  ok = ok && selection != header.end() && selection->is_object();
  if (ok) {
    TargetSelection& s = h.selection;
    int64_t depth = 0;
    ok = GetBool(*selection, "trees", &s.trees) &&
         GetBool(*selection, "all_processes", &s.all_processes) &&
         GetBool(*selection, "hardware_counters", &s.hardware_counters) &&
         GetInt(*selection, "cgroup_depth", &depth) && depth >= 0 && depth < (1 << 20);
    s.cgroup_depth = int(depth);
    auto list = [&](const char* key, auto check) {
      auto it = selection->find(key);
      if (it == selection->end() || !it->is_array()) return false;
      for (const json& item : *it) {
        if (!check(item)) return false;
      }
      return true;
    };
    ok = ok && list("pids", [&](const json& item) {
           if (!item.is_number_integer() ||
               (item.is_number_unsigned() && item.get<uint64_t>() > uint64_t(INT64_MAX))) {
             return false;
           }
           s.pids.push_back(item.get<int64_t>());
           return true;
         });
    for (auto [key, out] : {std::pair{"cgroups", &s.cgroups}, std::pair{"commands", &s.commands}}) {
      ok = ok && list(key, [&, out = out](const json& item) {
             if (!item.is_string()) return false;
             out->push_back(item.get<std::string>());
             return true;
           });
    }
  }
  if (!ok) {
    return state->Bad(
        "the header lacks a field or has one of the wrong type (doc/meter/running.md, \"The "
        "activity record\")");
  }
  state->counters_width = h.selection.hardware_counters ? 4 : 2;
  return std::unique_ptr<ActivityRecordReader>(new ActivityRecordReader(std::move(state)));
}

Result<std::optional<ActivitySnapshot>> ActivityRecordReader::Next() {
  State& s = *state_;
  std::string line;
  while (true) {
    if (!s.NextLine(&line)) {
      s.exhausted = true;
      return std::optional<ActivitySnapshot>();
    }
    if (s.ended) return s.Bad("a line after the end line");
    json object = json::parse(line, nullptr, false);
    if (object.is_discarded() || !object.is_object()) return s.Bad("not a JSON object");
    if (object.contains("end")) {
      int64_t count = 0;
      if (!object["end"].is_object() || !GetInt(object["end"], "snapshots", &count)) {
        return s.Bad("an end line without its snapshot count");
      }
      s.ended = true;
      continue;
    }
    if (object.contains("target")) {
      int64_t id = 0;
      TargetSample sample;
      std::string kind;
      if (!GetInt(object, "target", &id) || id < 0 ||
          !GetString(object, "key", &sample.target.key) || sample.target.key.empty() ||
          !GetString(object, "kind", &kind) || !GetString(object, "name", &sample.target.name) ||
          !GetInt(object, "pid", &sample.target.pid)) {
        return s.Bad("a target line needs target (an id), key, kind, name and pid");
      }
      std::optional<TargetKind> parsed = KindFromName(kind);
      if (!parsed) return s.Bad("unknown target kind '" + kind + "' (process, tree or cgroup)");
      sample.target.kind = *parsed;
      if (s.key_of.count(id)) return s.Bad("target id " + std::to_string(id) + " defined twice");
      if (s.by_key.count(sample.target.key)) {
        return s.Bad("target " + sample.target.key + " defined again while it is alive");
      }
      for (auto& [other, pending] : s.pending) {
        if (pending.target.key == sample.target.key) {
          return s.Bad("target " + sample.target.key + " defined twice");
        }
      }
      s.key_of[id] = sample.target.key;
      s.pending.emplace(id, std::move(sample));
      continue;
    }
    // A snapshot.
    ActivitySnapshot snapshot;
    int64_t cpus = 0;
    if (!GetInt(object, "time_ns", &snapshot.wall) ||
        !GetInt(object, "monotonic_ns", &snapshot.monotonic_nanos) ||
        !GetInt(object, "cpus", &cpus) || cpus < 0 || cpus >= (1 << 20) ||
        !GetInt(object, "busy_us", &snapshot.busy_microseconds) ||
        !GetInt(object, "total_us", &snapshot.total_microseconds) ||
        snapshot.busy_microseconds < 0 || snapshot.total_microseconds < 0 ||
        !object.contains("targets") || !object["targets"].is_array() || !object.contains("ended") ||
        !object["ended"].is_array()) {
      return s.Bad(
          "a snapshot line needs time_ns, monotonic_ns, cpus, busy_us, total_us, "
          "targets and ended (or it is not a target, snapshot or end line)");
    }
    snapshot.cpus = int(cpus);
    if (snapshot.monotonic_nanos < s.last_monotonic) return s.Bad("monotonic_ns went back");
    s.last_monotonic = snapshot.monotonic_nanos;
    for (const json& id_value : object["ended"]) {
      if (!id_value.is_number_integer()) return s.Bad("an ended id that is not an integer");
      int64_t id = id_value.get<int64_t>();
      if (!s.live.count(id)) return s.Bad("target " + std::to_string(id) + " ended but not alive");
      s.by_key.erase(s.key_of[id]);
      s.live.erase(id);
    }
    for (const json& item : object["targets"]) {
      if (!item.is_array() || int(item.size()) != s.counters_width) {
        return s.Bad("a target's counters are [id, cpu_us]" +
                     std::string(s.counters_width == 4 ? " plus cycles and instructions" : ""));
      }
      int64_t values[4] = {0, 0, -1, -1};
      for (int i = 0; i < s.counters_width; ++i) {
        if (!item[i].is_number_integer() ||
            (item[i].is_number_unsigned() && item[i].get<uint64_t>() > uint64_t(INT64_MAX))) {
          return s.Bad("a target's counter that is not an integer");
        }
        values[i] = item[i].get<int64_t>();
      }
      int64_t id = values[0];
      TargetSample* sample = nullptr;
      if (auto pending = s.pending.find(id); pending != s.pending.end()) {
        sample =
            &s.by_key.emplace(pending->second.target.key, std::move(pending->second)).first->second;
        s.pending.erase(pending);
        s.live[id] = true;
      } else if (s.live.count(id)) {
        sample = &s.by_key[s.key_of[id]];
        if (values[1] < sample->cpu_microseconds || WentBack(sample->cycles, values[2]) ||
            WentBack(sample->instructions, values[3])) {
          return s.Bad("target " + sample->target.key + "'s counters went back");
        }
      } else {
        return s.Bad("target " + std::to_string(id) + " used before it is defined (or after it " +
                     "ended)");
      }
      if (values[1] < 0 || values[2] < -1 || values[3] < -1) {
        return s.Bad("target " + sample->target.key + " has a negative counter");
      }
      sample->cpu_microseconds = values[1];
      sample->cycles = values[2];
      sample->instructions = values[3];
    }
    if (!s.pending.empty()) {
      return s.Bad("target " + s.pending.begin()->second.target.key +
                   " defined but not in the snapshot that follows");
    }
    snapshot.targets.reserve(s.by_key.size());
    for (const auto& [key, sample] : s.by_key) snapshot.targets.push_back(sample);
    return std::optional<ActivitySnapshot>(std::move(snapshot));
  }
}

Result<ActivityRecord> ReadActivityRecord(const std::string& path) {
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<ActivityRecordReader> reader,
                         ActivityRecordReader::Open(path));
  ActivityRecord record;
  record.header = reader->header();
  while (true) {
    KWATT_ASSIGN_OR_RETURN(std::optional<ActivitySnapshot> snapshot, reader->Next());
    if (!snapshot) break;
    record.snapshots.push_back(std::move(*snapshot));
  }
  record.complete = reader->complete();
  record.truncated = reader->truncated();
  return record;
}

}  // namespace kwatt::meter
