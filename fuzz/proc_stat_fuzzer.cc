// The activity reader's procfs parsers (src/meter/activity/activity_procfs.h). The first byte picks
// the parser: 0 a process's stat, 1 the machine's stat, 2 a CPU list, 3 a cgroup's cpu.stat and a
// schedstat. Besides "no crash": a process's name is what lies between the first '(' and the last
// ')', and a stat written back from what was read reads the same; 0 <= busy <= total; a CPU list is
// ascending and reads the same once written back.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "src/meter/activity/activity_procfs.h"

using namespace kwatt::meter::procfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      ProcessStat stat;
      if (!ParseProcessStat(text, &stat).ok()) return 0;
      size_t open = text.find('('), close = text.rfind(')');
      KWATT_FUZZ_CHECK(stat.comm == text.substr(open + 1, close - open - 1));
      KWATT_FUZZ_CHECK(stat.pid > 0 && stat.ppid >= 0 && stat.utime >= 0 && stat.stime >= 0 &&
                       stat.cutime >= 0 && stat.cstime >= 0 && stat.starttime >= 0);
      auto n = [](int64_t v) { return std::to_string(v); };
      std::string again = n(stat.pid) + " (" + std::string(stat.comm) + ") " + stat.state + " " +
                          n(stat.ppid) + " 0 0 0 0 0 0 0 0 0 " + n(stat.utime) + " " +
                          n(stat.stime) + " " + n(stat.cutime) + " " + n(stat.cstime) + " 0 0 " +
                          n(stat.num_threads) + " 0 " + n(stat.starttime) + "\n";
      ProcessStat reread;
      KWATT_FUZZ_CHECK(ParseProcessStat(again, &reread).ok());
      KWATT_FUZZ_CHECK(
          reread.pid == stat.pid && reread.comm == stat.comm && reread.state == stat.state &&
          reread.ppid == stat.ppid && reread.utime == stat.utime && reread.stime == stat.stime &&
          reread.cutime == stat.cutime && reread.cstime == stat.cstime &&
          reread.num_threads == stat.num_threads && reread.starttime == stat.starttime);
      return 0;
    }
    case 1: {
      MachineStat machine;
      if (!ParseMachineStat(text, &machine).ok()) return 0;
      KWATT_FUZZ_CHECK(machine.busy_ticks >= 0 && machine.busy_ticks <= machine.total_ticks);
      KWATT_FUZZ_CHECK(machine.cpu_lines >= 0);
      KWATT_FUZZ_CHECK(TicksToMicros(machine.total_ticks, 100) >= machine.total_ticks);
      return 0;
    }
    case 2: {
      auto cpus = ParseCpuList(text);
      if (!cpus.ok()) return 0;
      KWATT_FUZZ_CHECK(!cpus->empty());
      std::string again;
      for (size_t i = 0; i < cpus->size(); ++i) {
        KWATT_FUZZ_CHECK(i == 0 || (*cpus)[i] > (*cpus)[i - 1]);
        again += (i ? "," : "") + std::to_string((*cpus)[i]);
      }
      auto reread = ParseCpuList(again);
      KWATT_FUZZ_CHECK(reread.ok() && *reread == *cpus);
      return 0;
    }
    default: {
      int64_t value = 0;
      if (ParseCgroupUsage(text, &value)) KWATT_FUZZ_CHECK(value >= 0);
      if (ParseSchedstat(text, &value)) KWATT_FUZZ_CHECK(value >= 0);
      return 0;
    }
  }
}
