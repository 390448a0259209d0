// influxdb:URL: InfluxDB 1.x line protocol over HTTP (doc/meter.md, "InfluxDB").
// Private to the meter's outputs: open_output.cc opens it.
#ifndef KWATT_SRC_METER_OUTPUTS_INFLUXDB_H_
#define KWATT_SRC_METER_OUTPUTS_INFLUXDB_H_

#include <memory>

#include "kwatt/meter/outputs.h"
#include "src/meter/outputs/output_spec.h"

namespace kwatt::meter::internal {

// The output `spec` names, checked as far as it can be before the meter starts (InvalidArgument
// or PermissionDenied naming spec.shown).
Result<std::unique_ptr<OutputSink>> OpenInfluxdbOutput(const OutputSpec& spec,
                                                       const OutputOptions& options);

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_OUTPUTS_INFLUXDB_H_
