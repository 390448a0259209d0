// A simulated Omegawatt wattmeter: the lines `wattmetre-read` prints, for `kwatt collect`'s
// wattmetre:// source (src/collect/wattmetre.h) and its tests (`kwatt simulate wattmetre`).
//
// Sample k covers [t_k, t_k + period], t_k = first + k * period (the start rounded up to a
// multiple of the period, so that at 50 Hz a second holds 50 whole samples); its line carries t_k
// and each port's true mean power over the interval (the node's energy over it from the
// simulator's closed-form model, divided by the period, times the port's share: a node measured
// by two ports is two PSUs, half each). So the mean of a second's values is the true mean power of
// that second, and TruthJson gives the exact energies to compare against.
//
// Thread safety: a SimulatedWattmetre is used by one thread at a time.
#ifndef KWATT_SIMULATE_WATTMETRE_H_
#define KWATT_SIMULATE_WATTMETRE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/jobs/jobs_file.h"
#include "kwatt/simulate/node_model.h"
#include "kwatt/simulate/testbed.h"

namespace kwatt::simulate {

struct SimulatedWattmetreOptions {
  std::string id = "wattmetre1";  // the wattmeter's id; its ports are ID-portN
  int version = 2;                // wattmetre-read's line format: 2 or 3
  double rate = 50;               // samples a second, in (0, 1000]
  UnixNanos start = 0;            // the first sample is at the first multiple of the period >= it
  uint64_t seed = 1;              // the simulated testbed's seed, as given to kwatt serve
  jobs::JobSet jobs;              // the testbed's jobs, as given to kwatt serve
};

class SimulatedWattmetre {
 public:
  // Builds the simulated testbed the nodes are looked up in (its errors as Testbed::Build's).
  static Result<std::unique_ptr<SimulatedWattmetre>> Create(SimulatedWattmetreOptions options);
  ~SimulatedWattmetre();
  SimulatedWattmetre(const SimulatedWattmetre&) = delete;
  SimulatedWattmetre& operator=(const SimulatedWattmetre&) = delete;

  // Adds a node (its uid, and its site when known): the testbed's node of that uid (of that site),
  // or one of its own with its cluster's hardware (the uid up to its last '-'). Returns its index.
  // InvalidArgument for an empty uid.
  Result<size_t> AddNode(const std::string& uid, const std::string& site);
  // Adds the next port, measuring node `node` (an index from AddNode): the node's power is shared
  // evenly among its ports.
  void AddPort(size_t node);

  // The ports' mapping, as YAML: "NODE: [ID-port0, ...]" per node, in the order they were added.
  std::string MappingYaml() const;

  int64_t period() const { return period_; }  // nanoseconds
  UnixNanos first() const { return first_; }  // t_0

  // Appends sample k's line (with its '\n') to `line`.
  void AppendLine(int64_t k, std::string* line);

  // The exact energies over the first `samples` samples, as JSON: the wattmeter, its format, its
  // rate and period, the span, then each port's and each node's joules.
  std::string TruthJson(int64_t samples) const;

 private:
  struct Node {
    std::string uid;
    const NodeModel* model = nullptr;  // the testbed's, or `own`
    std::unique_ptr<NodeModel> own;
    std::vector<size_t> ports;
  };
  struct Port {
    size_t node;   // index in nodes_
    double share;  // 1 / the node's port count
  };

  explicit SimulatedWattmetre(SimulatedWattmetreOptions options);
  std::string PortName(size_t port) const;

  SimulatedWattmetreOptions options_;
  std::unique_ptr<Testbed> testbed_;
  std::vector<Node> nodes_;
  std::vector<Port> ports_;
  int64_t period_ = 0;
  UnixNanos first_ = 0;
  bool micro_ = true;  // times with 6 decimals (the period is whole microseconds), else 9
  std::vector<double> node_watts_;
};

}  // namespace kwatt::simulate

#endif  // KWATT_SIMULATE_WATTMETRE_H_
