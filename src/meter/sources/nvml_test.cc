// The NVML source over a fake NVML: a real shared library (tests/fake_nvml/fake_nvml.cc) loaded
// with dlopen, whose GPUs and energy traces each test sets. One test opens the machine's own
// libnvidia-ml.so.1, and skips where there is none.
#include "kwatt/meter/sources/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "src/meter/sources/nvml_counters.h"

namespace kwatt::meter::nvml_test {
namespace {

// The fake library, loaded by the test as the source loads it (one copy: the same path).
class FakeNvml {
 public:
  FakeNvml() {
    library_ = dlopen(KWATT_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    if (!library_) return;
    configure_ =
        reinterpret_cast<void (*)(const char*)>(dlsym(library_, "kwatt_fake_nvml_configure"));
    inits_ = reinterpret_cast<int (*)()>(dlsym(library_, "kwatt_fake_nvml_inits"));
  }
  ~FakeNvml() {
    if (library_) dlclose(library_);
  }
  bool loaded() const { return library_ && configure_ && inits_; }
  void Configure(const std::string& text) { configure_(text.c_str()); }
  int inits() { return inits_(); }

 private:
  void* library_ = nullptr;
  void (*configure_)(const char*) = nullptr;
  int (*inits_)() = nullptr;
};

MeterEnvironment FakeEnvironment() {
  MeterEnvironment environment;
  environment.nvml_library = KWATT_FAKE_NVML;
  return environment;
}

class NvmlTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fake_.loaded()) << KWATT_FAKE_NVML << ": " << dlerror(); }
  FakeNvml fake_;
};

TEST_F(NvmlTest, EachGpuIsADomainWithExactMicrojoules) {
  fake_.Configure(
      "gpu name=NVIDIA A100-SXM4-40GB;uuid=GPU-5c1e0a2b;energy=1000,1500,2750,2750,"
      "9000000000000\n"
      "gpu name=NVIDIA H100;uuid=GPU-77aa;energy=40,41,42,43,44\n");
  auto source = OpenNvml(FakeEnvironment());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const auto& domains = (*source)->domains();
  ASSERT_EQ(domains.size(), 2u);
  EXPECT_EQ(domains[0].source, "nvml");
  EXPECT_EQ(domains[0].name, "gpu-0");
  EXPECT_EQ(domains[0].kind, "gpu");
  EXPECT_EQ(domains[0].socket, 0);
  EXPECT_EQ(domains[0].origin, "NVML GPU 0 (NVIDIA A100-SXM4-40GB, GPU-5c1e0a2b)");
  EXPECT_EQ(domains[1].name, "gpu-1");
  EXPECT_EQ(domains[1].socket, 1);
  EXPECT_EQ((*source)->MaxReadPeriod(), std::chrono::nanoseconds::max());
  EXPECT_TRUE((*source)->Notes().empty());
  EXPECT_EQ(fake_.inits(), 1);

  std::vector<DomainReading> r;
  ASSERT_TRUE((*source)->Read(&r).ok());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].microjoules, 500'000);  // (1500 - 1000) mJ since the open
  EXPECT_EQ(r[1].microjoules, 1'000);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].microjoules, 1'750'000);
  EXPECT_EQ(r[0].flags, 0u);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].microjoules, 1'750'000);  // no energy: the same total
  ASSERT_TRUE((*source)->Read(&r).ok());
  // A 64-bit counter far past 2^32 millijoules: exact.
  EXPECT_EQ(r[0].microjoules, (9'000'000'000'000LL - 1000) * 1000);
  EXPECT_EQ(r[1].microjoules, 4'000);
  source->reset();
  EXPECT_EQ(fake_.inits(), 0);  // shut down when closed
}

TEST_F(NvmlTest, AbsentLibraryIsNotFoundNamingTheDriver) {
  MeterEnvironment environment;
  environment.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  auto source = OpenNvml(environment);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kNotFound);
  EXPECT_NE(
      source.status().message().find("no NVIDIA driver: /nonexistent/libnvidia-ml.so.1 not found"),
      std::string::npos)
      << source.status().message();
}

TEST_F(NvmlTest, ALibraryThatIsNotNvmlIsNamed) {
  // A real shared library without NVML's functions: the C library.
  MeterEnvironment environment;
  environment.nvml_library = "libc.so.6";
  auto source = OpenNvml(environment);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kNotFound);
  EXPECT_NE(source.status().message().find("libc.so.6 lacks nvml"), std::string::npos)
      << source.status().message();
}

TEST_F(NvmlTest, NoGpuIsNotFound) {
  fake_.Configure("");
  auto source = OpenNvml(FakeEnvironment());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(source.status().message().rfind("no GPU: NVML (", 0), 0u) << source.status().message();
  EXPECT_EQ(fake_.inits(), 0);  // shut down again
}

TEST_F(NvmlTest, InitialisationErrorsCarryNvmlsOwnString) {
  fake_.Configure("init=9\ngpu name=A;uuid=GPU-a;energy=1\n");
  auto source = OpenNvml(FakeEnvironment());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kNotFound);
  EXPECT_NE(source.status().message().find("no NVIDIA driver: "), std::string::npos);
  EXPECT_NE(source.status().message().find("Driver Not Loaded"), std::string::npos);

  fake_.Configure("init=4\ngpu name=A;uuid=GPU-a;energy=1\n");
  source = OpenNvml(FakeEnvironment());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(source.status().message().find("Insufficient Permissions"), std::string::npos);
  EXPECT_NE(source.status().message().find("/dev/nvidia"), std::string::npos);

  fake_.Configure("init=18\ngpu name=A;uuid=GPU-a;energy=1\n");
  source = OpenNvml(FakeEnvironment());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(source.status().message().find("RM has detected an NVML/RM version mismatch"),
            std::string::npos)
      << source.status().message();

  fake_.Configure("count=999\ngpu name=A;uuid=GPU-a;energy=1\n");
  source = OpenNvml(FakeEnvironment());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(source.status().message().find("cannot count the GPUs: Unknown Error"),
            std::string::npos);
  EXPECT_EQ(fake_.inits(), 0);
}

TEST_F(NvmlTest, GpusWithoutACounterAreNamedAndLeftOut) {
  fake_.Configure(
      "gpu name=Tesla K80;uuid=GPU-old;energy=\n"
      "gpu name=Tesla V100;uuid=GPU-new;energy=10,20\n"
      "gpu name=Hidden;uuid=GPU-hidden;energy=1;handle=4\n");
  auto source = OpenNvml(FakeEnvironment());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->domains().size(), 1u);
  EXPECT_EQ((*source)->domains()[0].name, "gpu-1");  // NVML's index, not its rank here
  EXPECT_EQ((*source)->domains()[0].socket, 1);
  std::vector<std::string> notes = (*source)->Notes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0],
            "GPU 0 (Tesla K80, GPU-old) has no energy counter (NVML: \"Not Supported\"; GPUs "
            "older than Volta have none): left out");
  EXPECT_EQ(notes[1],
            "GPU 2 cannot be opened: NVML says \"Insufficient Permissions\" (give access to its "
            "/dev/nvidia* device file)");
  std::vector<DomainReading> r;
  ASSERT_TRUE((*source)->Read(&r).ok());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].microjoules, 10'000);

  // Only GPUs without a counter: no GPU to measure, each named.
  fake_.Configure("gpu name=Tesla K80;uuid=GPU-old;energy=\n");
  source = OpenNvml(FakeEnvironment());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), Status::Code::kNotFound);
  EXPECT_NE(source.status().message().find("no GPU with an energy counter: GPU 0 (Tesla K80"),
            std::string::npos)
      << source.status().message();
}

TEST_F(NvmlTest, AGpuLostIsUnreadableThenCountedWhenBack) {
  // 15: NVML_ERROR_GPU_IS_LOST (fallen off the bus); then the counter again, then a reload.
  fake_.Configure("gpu name=A;uuid=GPU-a;energy=100,200,e15,e15,500,30,50\n");
  auto source = OpenNvml(FakeEnvironment());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<DomainReading> r;
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].microjoules, 100'000);
  EXPECT_EQ(r[0].flags, 0u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*source)->Read(&r).ok());  // a lost GPU is not the source failing
    EXPECT_EQ(r[0].flags, uint32_t(kUnreadable));
    EXPECT_EQ(r[0].microjoules, 100'000);
  }
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, 0u);
  EXPECT_EQ(r[0].microjoules, 400'000);  // the counter kept counting meanwhile
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, uint32_t(kReset));  // the driver reloaded: 30 < 500
  EXPECT_EQ(r[0].microjoules, 400'000);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, 0u);
  EXPECT_EQ(r[0].microjoules, 420'000);
}

TEST_F(NvmlTest, CountersResumeByUuidNotIndex) {
  fake_.Configure(
      "gpu name=A;uuid=GPU-a;energy=1000,1100\n"
      "gpu name=B;uuid=GPU-b;energy=5000,5200\n");
  std::string saved;
  {
    auto source = OpenNvml(FakeEnvironment());
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    std::vector<DomainReading> r;
    ASSERT_TRUE((*source)->Read(&r).ok());
    saved = (*source)->SaveCounters();
    EXPECT_EQ(saved, "nvml 1 GPU-a=1100 GPU-b=5200");
  }
  // Restarted: the GPUs came back in the other order, and used energy while the meter was down.
  fake_.Configure(
      "gpu name=B;uuid=GPU-b;energy=6000,6100\n"
      "gpu name=A;uuid=GPU-a;energy=1500,1600\n");
  auto source = OpenNvml(FakeEnvironment());
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->ResumeCounters(saved, std::chrono::hours(1)).ok());
  std::vector<DomainReading> r;
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ((*source)->domains()[0].origin, "NVML GPU 0 (B, GPU-b)");
  EXPECT_EQ(r[0].microjoules, (6100 - 5200) * 1000);
  EXPECT_EQ(r[1].microjoules, (1600 - 1100) * 1000);

  // Other GPUs: refused, and the first read counts from the open.
  fake_.Configure("gpu name=C;uuid=GPU-c;energy=10,20\n");
  source = OpenNvml(FakeEnvironment());
  ASSERT_TRUE(source.ok());
  Status resumed = (*source)->ResumeCounters(saved, std::chrono::seconds(1));
  EXPECT_EQ(resumed.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(resumed.message().find("other GPUs (GPU-a GPU-b) than these (GPU-c)"),
            std::string::npos)
      << resumed.message();
  EXPECT_EQ((*source)->ResumeCounters("rapl 1 0=5", std::chrono::seconds(1)).code(),
            Status::Code::kInvalidArgument);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].microjoules, 10'000);
}

TEST(NvmlCounters, RoundTripAndCorruption) {
  using internal::NvmlCounter;
  std::vector<NvmlCounter> counters = {{"GPU-a", 0}, {"MIG-GPU-b/1/0", 18446744073709551615ull}};
  std::string text = internal::FormatNvmlCounters(counters);
  auto parsed = internal::ParseNvmlCounters(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, counters);
  EXPECT_TRUE(internal::ParseNvmlCounters("nvml 1").ok());
  for (const char* bad :
       {"", "nvml 2 GPU-a=1", "nvml 10", "nvml 1 GPU-a", "nvml 1 =5",
        "nvml 1 GPU-a=", "nvml 1 GPU-a=-1", "nvml 1 GPU-a=18446744073709551616", "nvml 1 GPU-a=1x",
        "nvml 1 GPU-a=1 GPU-a=2", "nvml 1  GPU-a=1", "nvml 1 GPU=a=1"}) {
    auto result = internal::ParseNvmlCounters(bad);
    EXPECT_EQ(result.status().code(), Status::Code::kInvalidArgument) << bad;
  }
}

TEST_F(NvmlTest, ProcessesHoldingAContextPerGpu) {
  fake_.Configure(
      "gpu name=A;uuid=GPU-a;energy=1;processes=4242,17\n"
      "gpu name=B;uuid=GPU-b;energy=1\n"
      "gpu name=C;uuid=GPU-c;energy=1;processes_error=3\n");
  auto source = OpenNvml(FakeEnvironment());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<Status> errors;
  auto pids = (*source)->ComputeProcesses(&errors);
  ASSERT_TRUE(pids.ok()) << pids.status().ToString();
  ASSERT_EQ(pids->size(), 3u);
  EXPECT_EQ((*pids)[0], (std::vector<int64_t>{4242, 17}));
  EXPECT_TRUE((*pids)[1].empty());
  EXPECT_TRUE((*pids)[2].empty());
  EXPECT_TRUE(errors[0].ok());
  EXPECT_TRUE(errors[1].ok());
  EXPECT_EQ(errors[2].message(), "gpu-2: NVML cannot list its processes: Not Supported");
  // More processes than the first buffer holds.
  std::string many = "gpu name=A;uuid=GPU-a;energy=1;processes=";
  for (int pid = 100; pid < 140; ++pid) many += (pid > 100 ? "," : "") + std::to_string(pid);
  fake_.Configure(many + "\n");
  pids = (*source)->ComputeProcesses();
  ASSERT_TRUE(pids.ok());
  ASSERT_EQ((*pids)[0].size(), 40u);
  EXPECT_EQ((*pids)[0].back(), 139);
}

// The machine's own NVML, where there is one: the counters are read and never go back.
TEST(NvmlHardware, TheSystemsNvmlReadsItsGpus) {
  MeterEnvironment environment;  // libnvidia-ml.so.1, as the meter loads it
  auto source = OpenNvml(environment);
  if (!source.ok() && source.status().code() == Status::Code::kNotFound) {
    GTEST_SKIP() << "no NVML GPU to test on this machine: " << source.status().message();
  }
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_FALSE((*source)->domains().empty());
  std::vector<DomainReading> first, second;
  ASSERT_TRUE((*source)->Read(&first).ok());
  ASSERT_TRUE((*source)->Read(&second).ok());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(second[i].flags & kReset, 0u) << (*source)->domains()[i].origin;
    EXPECT_GE(second[i].microjoules, first[i].microjoules);
  }
  auto saved = internal::ParseNvmlCounters((*source)->SaveCounters());
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->size(), (*source)->domains().size());
}

}  // namespace
}  // namespace kwatt::meter::nvml_test
