// The activity record's reader (include/kwatt/meter/activity/activity_record.h) on any file.
// Besides "no crash": a record that reads is written again by the writer and reads back to the same
// header and snapshots, complete.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/meter/activity/activity_record.h"

using namespace kwatt::meter;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto input = kwatt::fuzz::ScratchDir() / "input.jsonl";
  const auto again = kwatt::fuzz::ScratchDir() / "again.jsonl";
  kwatt::fuzz::WriteFile(input, std::string_view(reinterpret_cast<const char*>(data), size));
  auto record = ReadActivityRecord(input.string());
  if (!record.ok()) return 0;
  auto writer = ActivityRecordWriter::Create(again.string(), record->header);
  KWATT_FUZZ_CHECK(writer.ok());
  for (const ActivitySnapshot& snapshot : record->snapshots) {
    KWATT_FUZZ_CHECK((*writer)->Write(snapshot).ok());
  }
  KWATT_FUZZ_CHECK((*writer)->Finish().ok());
  auto reread = ReadActivityRecord(again.string());
  KWATT_FUZZ_CHECK(reread.ok() && reread->complete && !reread->truncated);
  const ActivityRecordHeader& a = record->header;
  const ActivityRecordHeader& b = reread->header;
  KWATT_FUZZ_CHECK(
      a.writer == b.writer && a.host == b.host && a.boot_id == b.boot_id && a.kernel == b.kernel &&
      a.clock_ticks == b.clock_ticks && a.cpus == b.cpus && a.start == b.start &&
      a.selection.pids == b.selection.pids && a.selection.cgroups == b.selection.cgroups &&
      a.selection.commands == b.selection.commands && a.selection.trees == b.selection.trees &&
      a.selection.all_processes == b.selection.all_processes &&
      a.selection.cgroup_depth == b.selection.cgroup_depth &&
      a.selection.hardware_counters == b.selection.hardware_counters);
  KWATT_FUZZ_CHECK(reread->snapshots.size() == record->snapshots.size());
  for (size_t i = 0; i < record->snapshots.size(); ++i) {
    const ActivitySnapshot& x = record->snapshots[i];
    const ActivitySnapshot& y = reread->snapshots[i];
    KWATT_FUZZ_CHECK(x.wall == y.wall && x.monotonic_nanos == y.monotonic_nanos &&
                     x.cpus == y.cpus && x.busy_microseconds == y.busy_microseconds &&
                     x.total_microseconds == y.total_microseconds &&
                     x.targets.size() == y.targets.size());
    for (size_t t = 0; t < x.targets.size(); ++t) {
      const TargetSample& p = x.targets[t];
      const TargetSample& q = y.targets[t];
      KWATT_FUZZ_CHECK(p.target.key == q.target.key && p.target.name == q.target.name &&
                       p.target.kind == q.target.kind && p.target.pid == q.target.pid &&
                       p.cpu_microseconds == q.cpu_microseconds && p.cycles == q.cycles &&
                       p.instructions == q.instructions);
    }
  }
  return 0;
}
