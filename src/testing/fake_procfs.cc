#include "src/testing/fake_procfs.h"

#include <cstring>

#include "kwatt/core/output_file.h"
#include "src/meter/activity/activity_procfs.h"

namespace kwatt::meter::testing {

namespace fs = std::filesystem;

namespace {

Status Failed(const std::string& what, std::error_code error) {
  return Status::IOError("fake procfs: " + what + ": " + error.message());
}

int64_t NanosToTicks(int64_t nanos) {
  return nanos / (kNanosPerSecond / FakeProcfs::TicksPerSecond());
}

fs::path Below(const fs::path& root, const std::string& path) {
  return path == "/" || path.empty() ? root : root / path.substr(path[0] == '/' ? 1 : 0);
}

}  // namespace

int64_t FakeProcfs::TicksPerSecond() { return procfs::ClockTicksPerSecond(); }

FakeProcfs::FakeProcfs(fs::path root, int cpus) : root_(std::move(root)), cpus_(cpus) {
  std::error_code error;
  fs::create_directories(root_ / "proc", error);
  fs::create_directories(root_ / "sys/devices/system/cpu", error);
  fs::create_directories(root_ / "cgroup", error);
  (void)SetOnlineText("0-" + std::to_string(cpus - 1) + "\n");
  (void)WriteMachine();
  (void)WriteFile(root_ / "cgroup/cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
}

MeterEnvironment FakeProcfs::environment() const {
  MeterEnvironment environment;
  environment.procfs_root = (root_ / "proc").string();
  environment.sysfs_root = (root_ / "sys").string();
  environment.cgroup_root = (root_ / "cgroup").string();
  environment.hostname = "fake-node";
  return environment;
}

std::shared_ptr<ProcessCpuClocks> FakeProcfs::CpuClocks() const {
  class Clocks : public ProcessCpuClocks {
   public:
    explicit Clocks(const FakeProcfs* fake) : fake_(fake) {}
    int64_t Nanos(int64_t pid) override {
      auto it = fake_->processes_.find(pid);
      if (it == fake_->processes_.end() || it->second.state == 'Z') return -1;
      return it->second.user_nanos + it->second.system_nanos;
    }

   private:
    const FakeProcfs* fake_;
  };
  return std::make_shared<Clocks>(this);
}

Status FakeProcfs::WriteFile(const fs::path& path, const std::string& text) {
  return WriteWholeFile(path.string(), text);  // replaced once whole: a reader never sees half
}

Status FakeProcfs::Add(const Process& process) {
  if (const Process* before = Find(process.pid)) children_[before->ppid].erase(process.pid);
  processes_[process.pid] = process;
  children_[process.ppid].insert(process.pid);
  std::error_code error;
  fs::path dir = root_ / "proc" / std::to_string(process.pid);
  fs::create_directories(dir / "task", error);
  if (error) return Failed("cannot make " + dir.string(), error);
  std::vector<int64_t> threads = process.thread_ids;
  if (threads.empty()) threads.push_back(process.pid);
  for (int64_t tid : threads) {
    fs::create_directories(dir / "task" / std::to_string(tid), error);
    if (error) return Failed("cannot make a task directory", error);
  }
  KWATT_RETURN_IF_ERROR(Write(process.pid));
  KWATT_RETURN_IF_ERROR(WriteChildren(process.pid));
  return WriteChildren(process.ppid);
}

Status FakeProcfs::WriteChildren(int64_t pid) {
  if (!children_files_ || Find(pid) == nullptr) return Status::OK();
  // As fs/proc/array.c writes it: each child's pid and a space; zombies until they are reaped.
  std::string text;
  for (int64_t child : children_[pid]) text += std::to_string(child) + " ";
  fs::path task = root_ / "proc" / std::to_string(pid) / "task" / std::to_string(pid);
  std::error_code error;
  fs::create_directories(task, error);
  if (error) return Failed("cannot make " + task.string(), error);
  return WriteFile(task / "children", text);
}

FakeProcfs::Process* FakeProcfs::Find(int64_t pid) {
  auto it = processes_.find(pid);
  return it == processes_.end() ? nullptr : &it->second;
}

Status FakeProcfs::Write(int64_t pid) {
  const Process* p = Find(pid);
  if (p == nullptr) return Status::NotFound("fake procfs: no process " + std::to_string(pid));
  fs::path dir = root_ / "proc" / std::to_string(pid);
  int64_t threads = p->thread_ids.empty() ? 1 : int64_t(p->thread_ids.size());
  // The 52 fields of proc(5), as fs/proc/array.c writes them.
  std::string stat = std::to_string(pid) + " (" + p->comm + ") " + p->state + " " +
                     std::to_string(p->ppid) + " " + std::to_string(pid) + " " +
                     std::to_string(pid) + " 0 -1 4194304 120 0 0 0 " +
                     std::to_string(NanosToTicks(p->user_nanos)) + " " +
                     std::to_string(NanosToTicks(p->system_nanos)) + " " +
                     std::to_string(NanosToTicks(p->children_user_nanos)) + " " +
                     std::to_string(NanosToTicks(p->children_system_nanos)) + " 20 0 " +
                     std::to_string(threads) + " 0 " + std::to_string(p->start_ticks) +
                     " 3133440 409 18446744073709551615 94682359898112 94682359917993 "
                     "140726336409792 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94682359934000 "
                     "94682359935616 94682545266688 140726336416448 140726336416468 "
                     "140726336416468 140726336417771 0\n";
  KWATT_RETURN_IF_ERROR(WriteFile(dir / "stat", stat));
  if (p->leader_nanos != -2) {
    int64_t run = p->leader_nanos >= 0 ? p->leader_nanos : p->user_nanos + p->system_nanos;
    KWATT_RETURN_IF_ERROR(WriteFile(dir / "schedstat", std::to_string(run) + " 1000 5\n"));
  }
  std::string name;
  for (char c : p->comm) name += c == '\n' ? std::string("\\n") : std::string(1, c);
  return WriteFile(dir / "status",
                   "Name:\t" + name + "\nUmask:\t0022\nState:\t" + std::string(1, p->state) +
                       "\nTgid:\t" + std::to_string(pid) + "\nNgid:\t0\nPid:\t" +
                       std::to_string(pid) + "\nPPid:\t" + std::to_string(p->ppid) + "\n");
}

Status FakeProcfs::Run(int64_t pid, int64_t user_nanos, int64_t system_nanos) {
  Process* p = Find(pid);
  if (p == nullptr) return Status::NotFound("fake procfs: no process " + std::to_string(pid));
  p->user_nanos += user_nanos;
  p->system_nanos += system_nanos;
  if (p->leader_nanos >= 0) p->leader_nanos += user_nanos + system_nanos;
  return Write(pid);
}

Status FakeProcfs::Exit(int64_t pid) {
  Process* p = Find(pid);
  if (p == nullptr) return Status::NotFound("fake procfs: no process " + std::to_string(pid));
  p->state = 'Z';
  return Write(pid);
}

Status FakeProcfs::Reap(int64_t pid) {
  Process* p = Find(pid);
  if (p == nullptr) return Status::NotFound("fake procfs: no process " + std::to_string(pid));
  if (Process* parent = Find(p->ppid)) {
    parent->children_user_nanos += p->user_nanos + p->children_user_nanos;
    parent->children_system_nanos += p->system_nanos + p->children_system_nanos;
    KWATT_RETURN_IF_ERROR(Write(parent->pid));
  }
  return Vanish(pid);
}

Status FakeProcfs::Vanish(int64_t pid) {
  auto it = processes_.find(pid);
  int64_t parent = it == processes_.end() ? 0 : it->second.ppid;
  children_[parent].erase(pid);
  processes_.erase(pid);
  std::error_code error;
  fs::remove_all(root_ / "proc" / std::to_string(pid), error);
  if (error) return Failed("cannot remove process " + std::to_string(pid), error);
  return WriteChildren(parent);
}

Status FakeProcfs::Reparent(int64_t pid, int64_t new_ppid) {
  Process* p = Find(pid);
  if (p == nullptr) return Status::NotFound("fake procfs: no process " + std::to_string(pid));
  int64_t old_ppid = p->ppid;
  p->ppid = new_ppid;
  children_[old_ppid].erase(pid);
  children_[new_ppid].insert(pid);
  KWATT_RETURN_IF_ERROR(Write(pid));
  KWATT_RETURN_IF_ERROR(WriteChildren(old_ppid));
  return WriteChildren(new_ppid);
}

Status FakeProcfs::SetMachineTicks(int64_t user, int64_t nice, int64_t system, int64_t idle,
                                   int64_t iowait, int64_t irq, int64_t softirq, int64_t steal,
                                   int64_t guest) {
  int64_t values[9] = {user, nice, system, idle, iowait, irq, softirq, steal, guest};
  std::memcpy(machine_, values, sizeof values);
  return WriteMachine();
}

Status FakeProcfs::WriteMachine() {
  auto line = [&](const std::string& name, int64_t divisor) {
    std::string text = name;
    for (int i = 0; i < 9; ++i) text += " " + std::to_string(machine_[i] / divisor);
    return text + " 0\n";
  };
  std::string text = line("cpu ", 1);
  for (int cpu = 0; cpu < cpus_; ++cpu) text += line("cpu" + std::to_string(cpu), cpus_);
  text +=
      "intr 1234 0 0 0\nctxt 987654\nbtime 1745000000\nprocesses 4242\nprocs_running 2\n"
      "procs_blocked 0\nsoftirq 1 0 0 0 0 0 0 0 0 0 0\n";
  return WriteFile(root_ / "proc/stat", text);
}

Status FakeProcfs::SetOnlineText(const std::string& text) {
  fs::path path = root_ / "sys/devices/system/cpu/online";
  if (text.empty()) {
    std::error_code error;
    fs::remove(path, error);
    return Status::OK();
  }
  return WriteFile(path, text);
}

Status FakeProcfs::AddCgroup(const std::string& path, int64_t usage_microseconds) {
  fs::path dir = Below(root_ / "cgroup", path);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return Failed("cannot make cgroup " + path, error);
  return SetCgroupUsage(path, usage_microseconds);
}

Status FakeProcfs::SetCgroupUsage(const std::string& path, int64_t usage_microseconds) {
  int64_t user = usage_microseconds * 3 / 4;
  return WriteFile(Below(root_ / "cgroup", path) / "cpu.stat",
                   "usage_usec " + std::to_string(usage_microseconds) + "\nuser_usec " +
                       std::to_string(user) + "\nsystem_usec " +
                       std::to_string(usage_microseconds - user) +
                       "\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
}

Status FakeProcfs::RemoveCgroup(const std::string& path) {
  std::error_code error;
  fs::remove_all(Below(root_ / "cgroup", path), error);
  if (error) return Failed("cannot remove cgroup " + path, error);
  return Status::OK();
}

}  // namespace kwatt::meter::testing
