#include "kwatt/meter/sources/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

#include "src/meter/sources/nvml_abi.h"
#include "src/meter/sources/nvml_counters.h"

namespace kwatt::meter {

namespace internal {

std::string FormatNvmlCounters(const std::vector<NvmlCounter>& counters) {
  std::string text = "nvml 1";
  for (const auto& [uuid, millijoules] : counters) {
    text += " " + uuid + "=" + std::to_string(millijoules);
  }
  return text;
}

Result<std::vector<NvmlCounter>> ParseNvmlCounters(std::string_view text) {
  constexpr std::string_view kHead = "nvml 1";
  if (text.substr(0, kHead.size()) != kHead ||
      (text.size() > kHead.size() && text[kHead.size()] != ' ')) {
    return Status::InvalidArgument("saved NVML counters should start with \"nvml 1\", not \"" +
                                   std::string(text.substr(0, 16)) + "\"");
  }
  std::vector<NvmlCounter> counters;
  size_t at = kHead.size();
  while (at < text.size()) {
    ++at;  // the space
    size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view field = text.substr(at, end - at);
    at = end;
    size_t equal = field.rfind('=');
    if (equal == std::string_view::npos || equal == 0) {
      return Status::InvalidArgument("saved NVML counter \"" + std::string(field) +
                                     "\" should be UUID=MILLIJOULES");
    }
    std::string_view uuid = field.substr(0, equal), digits = field.substr(equal + 1);
    if (uuid.find('=') != std::string_view::npos) {
      return Status::InvalidArgument("saved NVML counter \"" + std::string(field) +
                                     "\" has a UUID with '='");
    }
    uint64_t millijoules = 0;
    auto [end_digits, error] =
        std::from_chars(digits.data(), digits.data() + digits.size(), millijoules);
    if (digits.empty() || error != std::errc() || end_digits != digits.data() + digits.size()) {
      return Status::InvalidArgument("saved NVML counter of " + std::string(uuid) + " \"" +
                                     std::string(digits) +
                                     "\" is not a number of millijoules below 2^64");
    }
    for (const auto& [seen, value] : counters) {
      if (seen == uuid) {
        return Status::InvalidArgument("saved NVML counters name " + std::string(uuid) + " twice");
      }
    }
    counters.emplace_back(std::string(uuid), millijoules);
  }
  return counters;
}

}  // namespace internal

namespace {

// NVML's return codes and buffer sizes that kwatt uses (its types: src/meter/sources/nvml_abi.h).
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
struct NvmlFunctions {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  nvmlReturn_t (*count)(unsigned int*);
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*total_energy)(nvmlDevice_t, unsigned long long*);
  const char* (*error_string)(nvmlReturn_t);
  // Optional: null when the library has neither version.
  nvmlReturn_t (*compute_processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
};

struct Gpu {
  unsigned index = 0;
  nvmlDevice_t device = nullptr;
  std::string uuid;
  uint64_t last_millijoules = 0;  // the counter at the last read that succeeded
};

class Nvml final : public NvmlSource {
 public:
  Nvml(void* library, NvmlFunctions functions) : library_(library), nvml_(functions) {}
  ~Nvml() override {
    if (initialised_) (void)nvml_.shutdown();
    dlclose(library_);
  }

  Status Open(const std::string& library_name) {
    nvmlReturn_t status = nvml_.init();
    if (status != NVML_SUCCESS) {
      std::string said = "NVML (" + library_name + ") failed to initialise: " + Error(status);
      if (status == NVML_ERROR_DRIVER_NOT_LOADED) {
        return Status::NotFound("no NVIDIA driver: " + said);
      }
      if (status == NVML_ERROR_NO_PERMISSION) {
        return Status::PermissionDenied(said +
                                        ": give read and write access to /dev/nvidiactl and "
                                        "/dev/nvidia* (the video group, or the container's "
                                        "device rules)");
      }
      return Status::Unavailable(said);
    }
    initialised_ = true;
    unsigned count = 0;
    status = nvml_.count(&count);
    if (status != NVML_SUCCESS) {
      return Status::Unavailable("NVML (" + library_name +
                                 ") cannot count the GPUs: " + Error(status));
    }
    if (count == 0) {
      return Status::NotFound("no GPU: NVML (" + library_name + ") sees none");
    }
    std::vector<std::string> left_out;
    for (unsigned i = 0; i < count; ++i) {
      const std::string gpu = "GPU " + std::to_string(i);
      Gpu g;
      g.index = i;
      status = nvml_.handle_by_index(i, &g.device);
      if (status != NVML_SUCCESS) {
        left_out.push_back(gpu + " cannot be opened: NVML says \"" + Error(status) + "\"" +
                           (status == NVML_ERROR_NO_PERMISSION
                                ? " (give access to its /dev/nvidia* device file)"
                                : ""));
        continue;
      }
      char name[kNameBufferSize] = {}, uuid[kUuidBufferSize] = {};
      if (nvml_.name(g.device, name, kNameBufferSize) != NVML_SUCCESS) {
        std::snprintf(name, sizeof name, "unnamed");
      }
      status = nvml_.uuid(g.device, uuid, kUuidBufferSize);
      if (status != NVML_SUCCESS) {
        left_out.push_back(gpu + " (" + name + ") has no UUID: NVML says \"" + Error(status) +
                           "\"");
        continue;
      }
      g.uuid = uuid;
      const std::string described = gpu + " (" + name + ", " + g.uuid + ")";
      unsigned long long millijoules = 0;
      status = nvml_.total_energy(g.device, &millijoules);
      if (status == NVML_ERROR_NOT_SUPPORTED) {
        left_out.push_back(described + " has no energy counter (NVML: \"" + Error(status) +
                           "\"; GPUs older than Volta have none): left out");
        continue;
      }
      if (status != NVML_SUCCESS) {
        left_out.push_back(described + " cannot read its energy counter: NVML says \"" +
                           Error(status) + "\": left out");
        continue;
      }
      g.last_millijoules = millijoules;
      domains_.push_back(
          Domain{"nvml", "gpu-" + std::to_string(i), "gpu", int(i), "NVML " + described});
      gpus_.push_back(std::move(g));
      totals_.push_back(0);
    }
    notes_ = left_out;
    if (gpus_.empty()) {
      std::string why;
      for (const std::string& s : left_out) why += (why.empty() ? "" : "; ") + s;
      return Status::NotFound("no GPU with an energy counter: " + why);
    }
    if (!nvml_.compute_processes) {
      notes_.push_back(
          "NVML lacks nvmlDeviceGetComputeRunningProcesses (_v3 and _v2): which processes use "
          "a GPU is unknown");
    }
    return Status::OK();
  }

  const std::vector<Domain>& domains() const override { return domains_; }

  Status Read(std::vector<DomainReading>* out) override {
    out->resize(gpus_.size());
    for (size_t i = 0; i < gpus_.size(); ++i) {
      Gpu& g = gpus_[i];
      DomainReading& reading = (*out)[i];
      reading.flags = 0;
      unsigned long long millijoules = 0;
      if (nvml_.total_energy(g.device, &millijoules) != NVML_SUCCESS) {
        reading.flags = kUnreadable;  // fallen off the bus, reset in progress...
      } else if (millijoules < g.last_millijoules) {
        reading.flags = kReset;  // the driver was reloaded: the energy since is unknown
        g.last_millijoules = millijoules;
      } else {
        totals_[i] += int64_t(millijoules - g.last_millijoules) * 1000;
        g.last_millijoules = millijoules;
      }
      reading.microjoules = totals_[i];
    }
    return Status::OK();
  }

  std::chrono::nanoseconds MaxReadPeriod() const override {
    return std::chrono::nanoseconds::max();
  }

  std::vector<std::string> Notes() const override { return notes_; }

  std::string SaveCounters() const override {
    std::vector<internal::NvmlCounter> counters;
    for (const Gpu& g : gpus_) counters.emplace_back(g.uuid, g.last_millijoules);
    return internal::FormatNvmlCounters(counters);
  }

  Status ResumeCounters(std::string_view saved, std::chrono::nanoseconds) override {
    Result<std::vector<internal::NvmlCounter>> counters = internal::ParseNvmlCounters(saved);
    if (!counters.ok()) return counters.status();
    bool same = counters->size() == gpus_.size();
    for (size_t i = 0; same && i < gpus_.size(); ++i) {
      same = std::any_of(counters->begin(), counters->end(),
                         [&](const internal::NvmlCounter& c) { return c.first == gpus_[i].uuid; });
    }
    if (!same) {
      std::string now, then;
      for (const Gpu& g : gpus_) now += (now.empty() ? "" : " ") + g.uuid;
      for (const auto& c : *counters) then += (then.empty() ? "" : " ") + c.first;
      return Status::InvalidArgument("the saved NVML counters are of other GPUs (" + then +
                                     ") than these (" + now + ")");
    }
    for (Gpu& g : gpus_) {
      for (const auto& [uuid, millijoules] : *counters) {
        if (uuid == g.uuid) g.last_millijoules = millijoules;
      }
    }
    return Status::OK();
  }

  Result<std::vector<std::vector<int64_t>>> ComputeProcesses(std::vector<Status>* errors) override {
    if (!nvml_.compute_processes) {
      return Status::NotFound(
          "NVML lacks nvmlDeviceGetComputeRunningProcesses_v3 and _v2 (a driver older than 450)");
    }
    std::vector<std::vector<int64_t>> pids(gpus_.size());
    if (errors) errors->assign(gpus_.size(), Status::OK());
    for (size_t i = 0; i < gpus_.size(); ++i) {
      std::vector<nvmlProcessInfo_t> infos(16);
      nvmlReturn_t status = NVML_SUCCESS;
      unsigned count = 0;
      for (int attempt = 0; attempt < 4; ++attempt) {
        count = unsigned(infos.size());
        status = nvml_.compute_processes(gpus_[i].device, &count, infos.data());
        if (status != NVML_ERROR_INSUFFICIENT_SIZE) break;
        // Processes started meanwhile: room for them and a few more.
        infos.resize(std::max<size_t>(count, infos.size()) + 16);
      }
      if (status != NVML_SUCCESS) {
        if (errors) {
          (*errors)[i] = Status::Unavailable(domains_[i].name +
                                             ": NVML cannot list its "
                                             "processes: " +
                                             Error(status));
        }
        continue;
      }
      for (unsigned k = 0; k < std::min<size_t>(count, infos.size()); ++k) {
        pids[i].push_back(int64_t(infos[k].pid));
      }
    }
    return pids;
  }

 private:
  std::string Error(nvmlReturn_t status) const {
    const char* text = nvml_.error_string ? nvml_.error_string(status) : nullptr;
    return text ? std::string(text) : "error " + std::to_string(status);
  }

  void* library_;
  NvmlFunctions nvml_;
  bool initialised_ = false;
  std::vector<Gpu> gpus_;
  std::vector<Domain> domains_;
  std::vector<int64_t> totals_;  // microjoules since opened (or resumed)
  std::vector<std::string> notes_;
};

template <typename Function>
bool Find(void* library, const char* name, Function* out) {
  *out = reinterpret_cast<Function>(dlsym(library, name));
  return *out != nullptr;
}

}  // namespace

Result<std::unique_ptr<NvmlSource>> OpenNvml(const MeterEnvironment& environment) {
  const std::string& path = environment.nvml_library;
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* error = dlerror();
    std::string why = error ? error : "";
    // A library that is there but cannot be loaded is not the same as no driver.
    if (why.find("No such file") != std::string::npos ||
        why.find("cannot open shared object") != std::string::npos || why.empty()) {
      return Status::NotFound("no NVIDIA driver: " + path +
                              " not found (GPUs are measured where the NVIDIA driver is "
                              "installed)");
    }
    return Status::IOError("cannot load NVML's library " + path + ": " + why);
  }
  NvmlFunctions f{};
  const char* missing = nullptr;
  if (!Find(library, "nvmlInit_v2", &f.init)) missing = "nvmlInit_v2";
  if (!Find(library, "nvmlShutdown", &f.shutdown)) missing = "nvmlShutdown";
  if (!Find(library, "nvmlDeviceGetCount_v2", &f.count)) missing = "nvmlDeviceGetCount_v2";
  if (!Find(library, "nvmlDeviceGetHandleByIndex_v2", &f.handle_by_index)) {
    missing = "nvmlDeviceGetHandleByIndex_v2";
  }
  if (!Find(library, "nvmlDeviceGetName", &f.name)) missing = "nvmlDeviceGetName";
  if (!Find(library, "nvmlDeviceGetUUID", &f.uuid)) missing = "nvmlDeviceGetUUID";
  if (!Find(library, "nvmlDeviceGetTotalEnergyConsumption", &f.total_energy)) {
    missing = "nvmlDeviceGetTotalEnergyConsumption";
  }
  if (!Find(library, "nvmlErrorString", &f.error_string)) missing = "nvmlErrorString";
  if (!Find(library, "nvmlDeviceGetComputeRunningProcesses_v3", &f.compute_processes)) {
    (void)Find(library, "nvmlDeviceGetComputeRunningProcesses_v2", &f.compute_processes);
  }
  if (missing) {
    dlclose(library);
    return Status::NotFound(path + " lacks " + missing +
                            ": it is not NVML, or an NVIDIA driver too old to count energy "
                            "(install a driver of 2018 or newer, 390+)");
  }
  auto source = std::make_unique<Nvml>(library, f);
  KWATT_RETURN_IF_ERROR(source->Open(path));
  return std::unique_ptr<NvmlSource>(std::move(source));
}

}  // namespace kwatt::meter
