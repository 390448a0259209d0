// `kwatt simulate energy|wattmetre|rapl|hwpc`: the simulated testbed's ground truth (here), the
// wattmeter's stream (simulate_wattmetre.cc), a RAPL tree (simulate_rapl.cc) and hwpc-sensor's
// output (simulate_hwpc.cc).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/kwatt/commands.h"
#include "kwatt/core/node_name.h"
#include "kwatt/core/time.h"
#include "kwatt/jobs/jobs_file.h"
#include "kwatt/simulate/testbed.h"

namespace kwatt::cli {

using nlohmann::ordered_json;

Runner RegisterSimulate(CLI::App* app) {
  struct Args {
    std::string node, start, end, jobs;
    uint64_t seed = 1;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* simulate = app->add_subcommand("simulate", "Ground truth of the simulated testbed");
  CLI::App* energy = simulate->add_subcommand(
      "energy",
      "The true energy of a simulated node over a window, from the continuous power "
      "model (not from samples)");
  energy->add_option("--node", args->node, "Node (nova-1.lyon or FQDN)")->required();
  energy->add_option("--start", args->start, "Start (epoch seconds, ISO 8601, now)")->required();
  energy->add_option("--end", args->end, "End")->required();
  energy->add_option("--jobs", args->jobs, "Jobs file, as given to kwatt serve")
      ->check(CLI::ExistingFile);
  energy->add_option("--seed", args->seed, "Seed, as given to kwatt serve")->capture_default_str();
  energy->add_flag("--json", args->json, "JSON output");
  Runner wattmetre = RegisterSimulateWattmetre(simulate);
  Runner rapl = RegisterSimulateRapl(simulate);
  Runner hwpc = RegisterSimulateHwpc(simulate);
  simulate->require_subcommand(1);
  return [energy, args, wattmetre, rapl, hwpc]() -> int {
    if (!energy->parsed()) {
      for (const Runner* other : {&wattmetre, &rapl, &hwpc}) {
        int code = (*other)();
        if (code >= 0) return code;
      }
      return -1;
    }
    UnixNanos now = WallClockNow();
    Result<NodeName> node = ParseNodeName(args->node);
    Result<UnixNanos> a = ParseUserTime(args->start, now);
    Result<UnixNanos> b = ParseUserTime(args->end, now);
    for (const Status& s : {node.status(), a.status(), b.status()}) {
      if (!s.ok()) {
        std::fprintf(stderr, "kwatt simulate energy: %s\n", s.message().c_str());
        return kExitUsage;
      }
    }
    jobs::JobSet jobs;
    if (!args->jobs.empty()) {
      Result<jobs::JobSet> loaded = jobs::JobSet::Load(args->jobs);
      if (!loaded.ok()) {
        std::fprintf(stderr, "kwatt simulate energy: %s\n", loaded.status().message().c_str());
        return ExitCodeOf(loaded.status());
      }
      jobs = std::move(*loaded);
    }
    simulate::Testbed::Options options;
    options.seed = args->seed;
    auto testbed = simulate::Testbed::Build(options, std::move(jobs));
    if (!testbed.ok()) {
      std::fprintf(stderr, "kwatt simulate energy: %s\n", testbed.status().message().c_str());
      return ExitCodeOf(testbed.status());
    }
    const simulate::Site* site = (*testbed)->FindSite(node->site);
    const simulate::Node* simulated = site ? (*testbed)->FindNode(*site, node->uid) : nullptr;
    if (!simulated) {
      std::fprintf(stderr, "kwatt simulate energy: no simulated node %s\n", node->Fqdn().c_str());
      return kExitUsage;
    }
    if (*b < *a) {
      std::fprintf(stderr, "kwatt simulate energy: the window ends before it starts\n");
      return kExitUsage;
    }
    double joules = simulated->model->EnergyJoules(*a, *b);
    double seconds = double(*b - *a) / 1e9;
    if (args->json) {
      ordered_json out;
      out["node"] = node->Fqdn();
      out["start"] = FormatParisTimestamp(*a);
      out["end"] = FormatParisTimestamp(*b);
      out["joules"] = joules;
      out["wh"] = joules / 3600;
      out["mean_watts"] = seconds > 0 ? joules / seconds : 0;
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("%s: %.3f J (%.6f Wh), mean %.3f W over %.3f s\n", node->Fqdn().c_str(), joules,
                  joules / 3600, seconds > 0 ? joules / seconds : 0, seconds);
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
