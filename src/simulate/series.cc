#include "kwatt/simulate/series.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kwatt/core/json_text.h"

namespace kwatt::simulate {
namespace {

double ElapsedSeconds(int64_t ns) { return double(ns) / 1e9; }

constexpr UnixNanos kForever = std::numeric_limits<int64_t>::max() / 4;
constexpr UnixNanos kNever = -kForever;

double AverageCpu(const NodeModel& node, UnixNanos t, double window_s) {
  int64_t w = int64_t(window_s * 1e9);
  return node.profile().Integral(t - w, t).cpu / window_s;
}

double AverageGpu(const NodeModel& node, UnixNanos t, double window_s) {
  int64_t w = int64_t(window_s * 1e9);
  return node.profile().Integral(t - w, t).gpu / window_s;
}

double AveragePower(const NodeModel& node, UnixNanos t, double window_s) {
  return node.EnergyJoules(t - int64_t(window_s * 1e9), t) / window_s;
}

// Bytes a link carried since `since`: a trickle when idle, up to 90 % of the rate under load.
double LinkBytes(const NodeModel& node, UnixNanos since, UnixNanos t, double rate_bps,
                 double direction) {
  double busy = node.profile().Integral(since, t).network;
  return rate_bps / 8 * direction * (3e-5 * ElapsedSeconds(t - since) + 0.9 * busy);
}

// A switch port's counters since the model's epoch: bytes, packets or discards, in or out
// (`rate_bps`: the link's rate).
double SwitchCounter(const NodeModel& n, Quantity quantity, uint64_t key, double rate_bps,
                     UnixNanos t) {
  bool in = quantity == Quantity::kSwitchBytesIn || quantity == Quantity::kSwitchPacketsIn ||
            quantity == Quantity::kSwitchDiscards;
  double bytes =
      1e10 * (1 + UnitFromHash(key)) + LinkBytes(n, kModelEpoch, t, rate_bps, in ? 1.0 : 0.7);
  if (quantity == Quantity::kSwitchBytesIn || quantity == Quantity::kSwitchBytesOut) {
    return std::floor(bytes);
  }
  if (quantity == Quantity::kSwitchDiscards) return std::floor(bytes / 1100 * 2e-7);
  return std::floor(bytes / (in ? 1100 : 900));
}

// node_cpu_seconds_total of one CPU (`share`: its factor of the node's busy time) in the mode
// `mode` (idle, iowait, softirq, system, user; 0 for the others) since the boot.
double CpuSeconds(const NodeModel& n, double share, int mode, UnixNanos t) {
  UnixNanos boot = n.BootTimeSeconds() * kNanosPerSecond;
  double up = ElapsedSeconds(t - boot);
  double busy = n.profile().Integral(boot, t).cpu * share;
  double user = 0.9 * busy, system = 0.06 * busy + 0.003 * up, iowait = 0.0008 * up,
         softirq = 0.004 * busy + 0.0005 * up;
  static constexpr int kIdle = 0, kIowait = 1, kSoftirq = 4, kSystem = 6, kUser = 7;
  switch (mode) {
    case kIdle:
      return up - user - system - iowait - softirq;
    case kIowait:
      return iowait;
    case kSoftirq:
      return softirq;
    case kSystem:
      return system;
    case kUser:
      return user;
    default:
      return 0;
  }
}

// The node exporter's memory figure `index`: total, free, available, buffers, cached, shared
// bytes, then swap's total and free.
double MemoryBytes(const NodeModel& n, int index, UnixNanos t) {
  double total = std::floor(n.hardware().memory_bytes * 0.985 / 4096) * 4096;
  double cpu = n.LoadAt(t).cpu;
  double cached = total * (0.03 + 0.05 * cpu);
  double free = total * (0.92 - 0.6 * cpu);
  switch (index) {
    case 0:
      return total;
    case 1:
      return free;
    case 2:
      return free + cached;
    case 3:
      return total * 0.002;
    case 4:
      return cached;
    case 5:
      return total * 0.001;
    default:
      return 4294967296.0;  // swap total and free: 4 GiB, unused
  }
}

// What the source's device would read without noise or rounding: a function of the node's
// model at `t`.
double TrueValue(const Source& s, UnixNanos t) {
  const NodeModel& n = *s.node;
  const NodeHardware& hw = n.hardware();
  const double share = s.share, param = s.param;
  switch (s.quantity) {
    case Quantity::kFeedPower:
      return share * n.PowerWatts(t);
    case Quantity::kBmcPower:
      return kBmcGain * AveragePower(n, t, 10);
    case Quantity::kBmcEnergyWh:
      return std::floor(kBmcGain * n.EnergySinceEpochJoules(t) / 3600);
    case Quantity::kPsuPower:
      return kBmcGain * share * AveragePower(n, t, 10);
    case Quantity::kPsuCurrent:
      return share * AveragePower(n, t, 10) / 230;
    case Quantity::kPsuVoltage:
      return 230;
    case Quantity::kOtherPower:
      return 0.9 * AveragePower(n, t, 10);
    case Quantity::kOtherVoltage:
      return param;
    case Quantity::kOtherCurrent:
      return AveragePower(n, t, 10) / param;
    case Quantity::kTempAmbient:
      return 20 + 3 * UnitFromHash(s.key);
    case Quantity::kTempCpu:
      return 32 + 43 * AverageCpu(n, t, 60);
    case Quantity::kTempExhaust:
      return 26 + 16 * AverageCpu(n, t, 120);
    case Quantity::kTempOther:
      return 30 + 14 * AverageCpu(n, t, 60);
    case Quantity::kFanRpm:
      return 3600 + 7200 * AverageCpu(n, t, 30);
    case Quantity::kFanPercent:
      return 15 + 50 * AverageCpu(n, t, 30);
    case Quantity::kCpuUsagePercent:
      return 100 * AverageCpu(n, t, 5);
    case Quantity::kSwitchBytesIn:
    case Quantity::kSwitchBytesOut:
    case Quantity::kSwitchPacketsIn:
    case Quantity::kSwitchPacketsOut:
    case Quantity::kSwitchDiscards:
      return SwitchCounter(n, s.quantity, s.key, param, t);
    case Quantity::kSwitchErrors:
      return 0;
    case Quantity::kCpuSeconds:
      return CpuSeconds(n, share, s.index, t);
    case Quantity::kCpuFrequency:
      return hw.cpu_base_hz * (0.55 + 0.45 * n.LoadAt(t).cpu);
    case Quantity::kLoadAverage:
      return 0.02 + hw.threads * AverageCpu(n, t, param);
    case Quantity::kMemory:
      return MemoryBytes(n, s.index, t);
    case Quantity::kBootTime:
      return double(n.BootTimeSeconds());
    case Quantity::kFilesystem:
      return s.index == 0 ? param : param * (0.8 - 0.1 * AverageCpu(n, t, 300));
    case Quantity::kNodeNetBytes:
    case Quantity::kNodeNetPackets: {
      double bytes = LinkBytes(n, n.BootTimeSeconds() * kNanosPerSecond, t, hw.link_bps,
                               s.index == 0 ? 1.0 : 0.7);
      return std::floor(s.quantity == Quantity::kNodeNetBytes ? bytes : bytes / 1000);
    }
    case Quantity::kProcsRunning:
      return 1 + std::round(hw.threads * n.LoadAt(t).cpu);
    case Quantity::kProcsBlocked:
      return 0;
    case Quantity::kGpuPower:
      return 32 + 215 * n.LoadAt(t).gpu;
    case Quantity::kGpuTemp:
      return 34 + 45 * AverageGpu(n, t, 60);
    case Quantity::kGpuClock:
      return 1380 * (0.3 + 0.7 * n.LoadAt(t).gpu);
    case Quantity::kGpuUtil:
      return 100 * n.LoadAt(t).gpu;
    case Quantity::kGpuMemCopy:
      return 60 * n.LoadAt(t).gpu;
    case Quantity::kGpuMemUsed:
      return 300 + 15000 * n.LoadAt(t).gpu;
    case Quantity::kGpuTensor:
      return 0.4 * n.LoadAt(t).gpu;
    case Quantity::kConstant:
      return param;
  }
  return 0;
}

}  // namespace

double Source::ValueAt(UnixNanos t) const {
  double v = TrueValue(*this, t);
  if (noise > 0) {
    uint64_t h = HashMix(key ^ uint64_t(t) * 0x9e3779b97f4a7c15ULL);
    v += noise * (2 * UnitFromHash(h) - 1);
  }
  if (step > 0) {
    v = scaled ? std::round(v / step) * step : std::round(v / step) / (1 / step);
  }
  return v;
}

int64_t SamplingGrid::MaxJitter(int64_t period) const {
  if (exact) return 0;
  return std::min<int64_t>(period / 10, 30 * kNanosPerMilli);
}

UnixNanos SamplingGrid::TimeOf(int64_t k, int64_t period) const {
  if (exact) return k * period;
  // A device-constant phase and a per-sample jitter, both whole microseconds.
  int64_t micros = std::max<int64_t>(period / kNanosPerMicro, 1);
  int64_t offset = int64_t(HashMix(key ^ uint64_t(period)) % uint64_t(micros)) * kNanosPerMicro;
  int64_t jitter_micros = MaxJitter(period) / kNanosPerMicro;
  int64_t jitter =
      jitter_micros > 0
          ? int64_t(HashMix(key + uint64_t(k) * 0x9e3779b97f4a7c15ULL) % uint64_t(jitter_micros)) *
                kNanosPerMicro
          : 0;
  return k * period + offset + jitter;
}

int64_t SamplingGrid::FirstIndexAtOrAfter(UnixNanos t, int64_t period) const {
  int64_t span = exact ? 0 : period + MaxJitter(period);  // offset < period, jitter < MaxJitter
  int64_t k = FloorDiv(t - span, period);
  while (TimeOf(k, period) < t) ++k;
  return k;
}

int64_t OutputSeries::CountIn(UnixNanos lo, UnixNanos hi) const {
  if (recorded) {
    auto [a, b] = RecordedIn(lo, hi);
    return int64_t(b - a);
  }
  int64_t count = 0;
  for (const Segment& s : segments) {
    UnixNanos a = std::max(lo, s.begin), b = std::min(hi, s.end);
    if (a >= b) continue;
    count += grid.FirstIndexAtOrAfter(b, s.period) - grid.FirstIndexAtOrAfter(a, s.period);
  }
  return count;
}

bool IsCounterMetric(std::string_view metric_id) { return metric_id.ends_with("_total"); }

void OutputSeries::Derive() {
  counter = IsCounterMetric(metric_id);
  row_middle = "\",\"device_id\":";
  AppendJsonString(&row_middle, device_id);
  row_middle += ",\"metric_id\":";
  AppendJsonString(&row_middle, metric_id);
  row_middle += ",\"value\":";
  row_end = ",\"labels\":" + labels_json + "}";
}

std::pair<size_t, size_t> OutputSeries::RecordedIn(UnixNanos lo, UnixNanos hi) const {
  auto before = [](const RecordedSample& s, UnixNanos t) { return s.t < t; };
  auto a = std::lower_bound(recorded->begin(), recorded->end(), lo, before);
  auto b = std::lower_bound(a, recorded->end(), hi, before);
  return {size_t(a - recorded->begin()), size_t(b - recorded->begin())};
}

double OutputSeries::ValueAt(UnixNanos t) const {
  for (const auto& [begin, end] : nan_spans) {
    if (t >= begin && t < end) return NAN;
  }
  auto true_value = [&](UnixNanos at) {
    double sum = 0;
    for (const Source& source : sources) sum += source.ValueAt(at);
    return sum;
  };
  for (const jobs::Fault& fault : faults) {
    if (t < fault.start || t >= fault.end) continue;
    UnixNanos read_at;
    if (__builtin_add_overflow(fault.stuck ? fault.start : t, fault.late, &read_at)) read_at = t;
    return true_value(read_at) * fault.scale + fault.bias;
  }
  return true_value(t);
}

std::string RenderLabels(LabelList labels, const std::vector<std::string>& device_orig) {
  std::sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) {
    return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
  });
  std::string out = "{";
  bool placed_orig = device_orig.empty();
  auto put_orig = [&] {
    if (out.size() > 1) out += ',';
    out += "\"_device_orig\":[";
    std::vector<std::string> sorted = device_orig;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (i) out += ',';
      AppendJsonString(&out, sorted[i]);
    }
    out += ']';
    placed_orig = true;
  };
  const std::string orig_key = "_device_orig";
  for (const auto& [key, value] : labels) {
    if (!placed_orig &&
        (key.size() > orig_key.size() || (key.size() == orig_key.size() && key > orig_key))) {
      put_orig();
    }
    if (out.size() > 1) out += ',';
    AppendJsonString(&out, key);
    out += ':';
    AppendJsonString(&out, value);
  }
  if (!placed_orig) put_orig();
  out += '}';
  return out;
}

namespace {

struct Builder {
  const Testbed& testbed;
  const Site& site;
  const Node& node;
  const std::vector<std::string>& wanted;
  std::vector<OutputSeries>* out;

  bool Wants(std::string_view metric_id) const {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), metric_id) != wanted.end();
  }

  // When the metric is sampled, at which period: its period outside on-demand jobs, its
  // optional period inside the node's jobs whose types enable it.
  std::vector<Segment> Timeline(const CatalogueEntry& entry, std::string_view metric_id) const {
    int64_t base = entry.period_ms * kNanosPerMilli;
    int64_t optional = entry.optional_period_ms * kNanosPerMilli;
    bool exporter_default =
        entry.IsPrometheusGroup() && entry.name.find("default") != std::string::npos;
    std::vector<std::pair<UnixNanos, UnixNanos>> on;
    if (optional > 0) {
      for (const jobs::Job* job : node.jobs) {
        if (MonitorEnables(job->types, entry.name) || MonitorEnables(job->types, metric_id) ||
            (exporter_default && JobRunsNodeExporter(job->types))) {
          UnixNanos begin = job->started_at, end = job->EffectiveEnd();
          if (!on.empty() && begin <= on.back().second) {
            on.back().second = std::max(on.back().second, end);
          } else {
            on.emplace_back(begin, end);
          }
        }
      }
    }
    std::vector<Segment> segments;
    UnixNanos cursor = kNever;
    for (const auto& [begin, end] : on) {
      if (base > 0 && cursor < begin) segments.push_back({cursor, begin, base});
      segments.push_back({begin, end, optional});
      cursor = end;
    }
    if (base > 0) segments.push_back({cursor, kForever, base});
    return segments;
  }

  // Removes the samples of the outages that silence this series; marks those of the outages that
  // make it report NaN.
  void ApplyOutages(OutputSeries* series, const std::vector<std::string>& devices) const {
    for (const jobs::Outage& outage : testbed.jobs().outages) {
      if (outage.site != site.uid) continue;
      if (!outage.metric.empty() && outage.metric != series->metric_id) continue;
      if (std::find(devices.begin(), devices.end(), outage.device) == devices.end()) continue;
      if (outage.nan) {
        series->nan_spans.emplace_back(outage.start, outage.end);
        continue;
      }
      std::vector<Segment> kept;
      for (const Segment& s : series->segments) {
        if (outage.end <= s.begin || outage.start >= s.end) {
          kept.push_back(s);
          continue;
        }
        if (s.begin < outage.start) kept.push_back({s.begin, outage.start, s.period});
        if (outage.end < s.end) kept.push_back({outage.end, s.end, s.period});
      }
      series->segments = std::move(kept);
    }
  }

  // Keeps the faults that make this series lie, in the file's order.
  void ApplyFaults(OutputSeries* series, const std::vector<std::string>& devices) const {
    for (const jobs::Fault& fault : testbed.jobs().faults) {
      if (fault.site != site.uid) continue;
      if (!fault.metric.empty() && fault.metric != series->metric_id) continue;
      if (std::find(devices.begin(), devices.end(), fault.device) == devices.end()) continue;
      series->faults.push_back(fault);
    }
  }

  void Emit(const std::string& device_id, const std::string& metric_id, const LabelList& labels,
            const std::vector<std::string>& device_orig, std::vector<Source> sources,
            const std::string& sampler, bool exact, std::vector<Segment> segments) const {
    if (segments.empty()) return;
    OutputSeries series;
    series.device_id = device_id;
    series.metric_id = metric_id;
    series.labels_json = RenderLabels(labels, device_orig);
    series.grid = SamplingGrid{HashText(site.uid + "/" + sampler, testbed.seed()), exact};
    series.segments = std::move(segments);
    for (Source& source : sources) {
      source.key = HashText(device_id + "|" + metric_id + "|" + series.labels_json + "|" +
                                std::to_string(&source - sources.data()),
                            testbed.seed());
    }
    series.sources = std::move(sources);
    std::vector<std::string> silenced = {device_id, node.uid};
    silenced.insert(silenced.end(), device_orig.begin(), device_orig.end());
    ApplyOutages(&series, silenced);
    if (series.segments.empty()) return;
    ApplyFaults(&series, silenced);
    series.Derive();
    out->push_back(std::move(series));
  }

  Source Make(Quantity q, double step = 0, double noise = 0, double share = 1, double param = 0,
              int index = 0) const {
    Source s;
    s.node = node.model.get();
    s.quantity = q;
    s.step = step;
    s.noise = noise;
    s.share = share;
    s.param = param;
    s.index = index;
    return s;
  }
};

Quantity BmcQuantity(const std::string& name, const LabelList& labels, double* param) {
  auto label = [&](const char* key) -> std::string {
    for (const auto& [k, v] : labels) {
      if (k == key) return v;
    }
    return "";
  };
  if (name == "bmc_node_power_watt") return Quantity::kBmcPower;
  if (name == "bmc_node_power_watthour_total") return Quantity::kBmcEnergyWh;
  if (name == "bmc_psu_power_watt") return Quantity::kPsuPower;
  if (name == "bmc_psu_current_amp") return Quantity::kPsuCurrent;
  if (name == "bmc_psu_voltage_volt") return Quantity::kPsuVoltage;
  if (name == "bmc_other_power_watt") return Quantity::kOtherPower;
  if (name == "bmc_other_voltage_volt" || name == "bmc_other_current_amp") {
    *param = label("id").find("_in_") != std::string::npos ? 230 : 12;
    return name == "bmc_other_voltage_volt" ? Quantity::kOtherVoltage : Quantity::kOtherCurrent;
  }
  if (name == "bmc_ambient_temp_celsius") return Quantity::kTempAmbient;
  if (name == "bmc_cpu_temp_celsius") return Quantity::kTempCpu;
  if (name == "bmc_exhaust_temp_celsius") return Quantity::kTempExhaust;
  if (name.ends_with("_temp_celsius")) return Quantity::kTempOther;
  if (name == "bmc_fan_speed_rpm") return Quantity::kFanRpm;
  if (name.ends_with("_percent")) {
    return name.find("fan") != std::string::npos ? Quantity::kFanPercent
                                                 : Quantity::kCpuUsagePercent;
  }
  if (name.ends_with("_watt")) return Quantity::kOtherPower;
  *param = 1;
  return Quantity::kConstant;
}

Quantity SwitchQuantity(const std::string& name) {
  bool in = name.find("ifacein") != std::string::npos;
  if (name.find("discard") != std::string::npos) return Quantity::kSwitchDiscards;
  if (name.find("error") != std::string::npos) return Quantity::kSwitchErrors;
  if (name.find("bytes") != std::string::npos) {
    return in ? Quantity::kSwitchBytesIn : Quantity::kSwitchBytesOut;
  }
  return in ? Quantity::kSwitchPacketsIn : Quantity::kSwitchPacketsOut;
}

void AddPrometheus(const Builder& b, const CatalogueEntry& entry, const std::string& metric_id) {
  const NodeHardware& hw = b.node.model->hardware();
  std::vector<Segment> timeline = b.Timeline(entry, metric_id);
  if (timeline.empty()) return;
  std::string id = metric_id.substr(5);  // without "prom_"
  const std::string& uid = b.node.uid;
  bool gpu_exporter = id.rfind("DCGM_", 0) == 0;
  std::string sampler = uid + (gpu_exporter ? "-dcgm" : "-exporter");
  auto emit = [&](const LabelList& labels, Source source) {
    b.Emit(uid, metric_id, labels, {}, {source}, sampler, false, timeline);
  };
  if (gpu_exporter) {
    Quantity q = Quantity::kConstant;
    double step = 1;
    if (id == "DCGM_FI_DEV_POWER_USAGE")
      q = Quantity::kGpuPower, step = 0.001;
    else if (id == "DCGM_FI_DEV_GPU_TEMP")
      q = Quantity::kGpuTemp;
    else if (id == "DCGM_FI_DEV_SM_CLOCK")
      q = Quantity::kGpuClock;
    else if (id == "DCGM_FI_DEV_GPU_UTIL")
      q = Quantity::kGpuUtil;
    else if (id == "DCGM_FI_DEV_MEM_COPY_UTIL")
      q = Quantity::kGpuMemCopy;
    else if (id == "DCGM_FI_DEV_FB_USED")
      q = Quantity::kGpuMemUsed;
    else if (id == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
      q = Quantity::kGpuTensor, step = 1e-6;
    for (int gpu = 0; gpu < hw.gpu_count; ++gpu) {
      emit({{"gpu", std::to_string(gpu)}, {"device", "nvidia" + std::to_string(gpu)}},
           b.Make(q, step, q == Quantity::kGpuPower ? 1.5 : 0));
    }
    return;
  }
  static const char* kModes[] = {"idle",    "iowait", "irq",    "nice",
                                 "softirq", "steal",  "system", "user"};
  if (id == "node_cpu_seconds_total") {
    for (int cpu = 0; cpu < hw.threads; ++cpu) {
      // At most 1: busy CPU time can never outgrow elapsed time (idle must not decrease).
      double factor = 0.96 + 0.04 * UnitFromHash(HashText(uid + "/cpu" + std::to_string(cpu), 7));
      for (int mode = 0; mode < 8; ++mode) {
        emit({{"cpu", std::to_string(cpu)}, {"mode", kModes[mode]}},
             b.Make(Quantity::kCpuSeconds, 0.01, 0, factor, 0, mode));
      }
    }
  } else if (id == "node_cpu_scaling_frequency_hertz") {
    for (int cpu = 0; cpu < hw.threads; ++cpu) {
      emit({{"cpu", std::to_string(cpu)}}, b.Make(Quantity::kCpuFrequency, 1000, 2e7));
    }
  } else if (id == "node_filesystem_free_bytes" || id == "node_filesystem_size_bytes") {
    int index = id == "node_filesystem_size_bytes" ? 0 : 1;
    emit({{"device", "/dev/sda3"}, {"fstype", "ext4"}, {"mountpoint", "/"}},
         b.Make(Quantity::kFilesystem, 4096, 0, 1, 31453646848.0, index));
    emit({{"device", "/dev/sda5"}, {"fstype", "ext4"}, {"mountpoint", "/tmp"}},
         b.Make(Quantity::kFilesystem, 4096, 0, 1, 392826372096.0, index));
  } else if (id == "node_load1" || id == "node_load5" || id == "node_load15") {
    double window = id == "node_load1" ? 60 : id == "node_load5" ? 300 : 900;
    emit({}, b.Make(Quantity::kLoadAverage, 0.01, 0, 1, window));
  } else if (id.rfind("node_memory_", 0) == 0) {
    static const char* kFigures[] = {"MemTotal", "MemFree", "MemAvailable", "Buffers",
                                     "Cached",   "Shmem",   "SwapFree",     "SwapTotal"};
    for (int i = 0; i < 8; ++i) {
      if (id == std::string("node_memory_") + kFigures[i] + "_bytes") {
        emit({}, b.Make(Quantity::kMemory, 4096, 0, 1, 0, i));
      }
    }
  } else if (id == "node_boot_time_seconds") {
    emit({}, b.Make(Quantity::kBootTime));
  } else if (id.rfind("node_network_", 0) == 0) {
    int direction = id.find("transmit") != std::string::npos ? 1 : 0;
    Quantity q = id.find("packets") != std::string::npos ? Quantity::kNodeNetPackets
                                                         : Quantity::kNodeNetBytes;
    for (const std::string& name : b.node.interface_names) {
      emit({{"device", name}}, b.Make(q, 0, 0, 1, 0, direction));
    }
  } else if (id == "node_procs_running") {
    emit({}, b.Make(Quantity::kProcsRunning));
  } else if (id == "node_procs_blocked") {
    emit({}, b.Make(Quantity::kProcsBlocked));
  }
  // kwollect_custom and unknown ids: values pushed by users; the simulator has none.
}

void AddNodeSeries(const Builder& b) {
  const Node& node = b.node;
  bool catalogue_has_pdu = false;
  for (const CatalogueMetric& metric : node.cluster->catalogue.MetricsOf(node.uid)) {
    const CatalogueEntry& entry = *metric.entry;
    if (entry.protocol == "pdu") catalogue_has_pdu = true;
    if (!b.Wants(metric.metric_id)) continue;
    const std::string& protocol = entry.protocol;
    if (protocol == "prometheus") {
      AddPrometheus(b, entry, metric.metric_id);
      continue;
    }
    std::vector<Segment> timeline = b.Timeline(entry, metric.metric_id);
    if (timeline.empty()) continue;
    if (protocol == "wattmetre") {
      if (node.wattmetre_ports.empty()) continue;
      std::vector<Source> sources;
      std::vector<std::string> orig;
      for (const Feed& port : node.wattmetre_ports) {
        sources.push_back(b.Make(Quantity::kFeedPower, 0.01, 0.3, port.share));
        orig.push_back(port.device_id);
      }
      b.Emit(node.uid, metric.metric_id, {}, orig, std::move(sources),
             node.wattmetre_ports[0].sampler, true, timeline);
    } else if (protocol == "pdu") {
      // Outlets with the same labels on the same PDU are summed; others are separate rows.
      for (const Feed& outlet : node.pdu_outlets) {
        b.Emit(node.uid, metric.metric_id, outlet.labels, {outlet.device_id},
               {b.Make(Quantity::kFeedPower, 1, 1.0, outlet.share)}, outlet.sampler, false,
               timeline);
      }
    } else if (protocol == "network_equipment") {
      std::string interface;
      for (const auto& [key, value] : entry.labels) {
        if (key == "interface") interface = value;
      }
      for (const Feed& port : node.switch_ports) {
        if (port.labels.empty() || port.labels[0].second != interface) continue;
        b.Emit(node.uid, metric.metric_id, port.labels, {port.device_id},
               {b.Make(SwitchQuantity(metric.metric_id), 0, 0, 1, port.rate_bps)}, port.sampler,
               false, timeline);
      }
    } else {  // snmp, ipmisensor: the node's BMC, reported under the node's id
      double param = 0;
      Quantity q = BmcQuantity(metric.metric_id, entry.labels, &param);
      double step = 1, noise = 0, share = 1;
      if (q == Quantity::kTempCpu || q == Quantity::kTempOther || q == Quantity::kTempExhaust ||
          q == Quantity::kTempAmbient) {
        noise = 0.4;
      } else if (q == Quantity::kFanRpm) {
        noise = 60;
      } else if (q == Quantity::kPsuVoltage) {
        noise = 2;
      } else if (q == Quantity::kBmcEnergyWh) {
        step = 0;
      } else if (q == Quantity::kPsuPower || q == Quantity::kPsuCurrent) {
        share = 1.0 / std::max(1, node.model->hardware().psu_count);
      }
      Source source = b.Make(q, step, noise, share, param);
      if (entry.scale_factor != 1.0) {
        source.step = entry.scale_factor;
        source.scaled = true;
      }
      b.Emit(node.uid, metric.metric_id, entry.labels, {}, {source}, node.uid + "-bmc", false,
             timeline);
    }
  }
  // Outlets the reference maps to the node although its cluster's catalogue lists no PDU metric
  // (nantes/ecotype, lille/chifflot): Kwollect still collects them, at 1 s.
  if (!catalogue_has_pdu && !node.pdu_outlets.empty() && b.Wants("pdu_outlet_power_watt")) {
    CatalogueEntry pdu;
    pdu.name = "pdu_outlet_power_watt";
    pdu.period_ms = 1000;
    pdu.protocol = "pdu";
    std::vector<Segment> timeline = b.Timeline(pdu, pdu.name);
    for (const Feed& outlet : node.pdu_outlets) {
      b.Emit(node.uid, pdu.name, outlet.labels, {outlet.device_id},
             {b.Make(Quantity::kFeedPower, 1, 1.0, outlet.share)}, outlet.sampler, false, timeline);
    }
  }
}

}  // namespace

std::vector<OutputSeries> SeriesOfDevice(const Testbed& testbed, const Site& site,
                                         const DeviceRef& device,
                                         const std::vector<std::string>& metrics) {
  std::vector<OutputSeries> out;
  Builder b{testbed, site, *device.node, metrics, &out};
  if (device.kind == DeviceRef::Kind::kNode) {
    AddNodeSeries(b);
    return out;
  }
  // A feed device: its own rows, without aliasing. Build the node's rows and keep those of this
  // feed alone, renamed, so that both views always agree.
  std::vector<OutputSeries> node_rows;
  Builder nb{testbed, site, *device.node, metrics, &node_rows};
  AddNodeSeries(nb);
  const Feed& feed = *device.feed;
  for (OutputSeries& series : node_rows) {
    if (series.labels_json.find("\"" + feed.device_id + "\"") == std::string::npos) continue;
    size_t position = 0;
    std::vector<std::string> origins;
    // Which source is this feed: the index of its id in the sorted _device_orig list matches the
    // order sources were added (feeds are listed in the node's order).
    const std::vector<Feed>& feeds =
        device.kind == DeviceRef::Kind::kWattmetrePort ? device.node->wattmetre_ports
        : device.kind == DeviceRef::Kind::kPduOutlet   ? device.node->pdu_outlets
                                                       : device.node->switch_ports;
    if (series.sources.size() > 1) {
      for (size_t i = 0; i < feeds.size(); ++i) {
        if (&feeds[i] == &feed) position = i;
      }
    }
    OutputSeries own = series;
    own.device_id = feed.device_id;
    own.sources = {series.sources[position]};
    own.labels_json = RenderLabels(feed.labels, {});
    own.Derive();
    out.push_back(std::move(own));
  }
  return out;
}

}  // namespace kwatt::simulate
