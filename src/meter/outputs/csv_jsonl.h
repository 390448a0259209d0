// csv:PATH and jsonl:PATH: kwatt's own formats of the meter's reports (doc/meter.md, "CSV"
// and "JSON Lines").
// Private to the meter's outputs: open_output.cc opens it.
#ifndef KWATT_SRC_METER_OUTPUTS_CSV_JSONL_H_
#define KWATT_SRC_METER_OUTPUTS_CSV_JSONL_H_

#include <memory>

#include "kwatt/meter/outputs.h"
#include "src/meter/outputs/output_spec.h"

namespace kwatt::meter::internal {

// The output `spec` names, checked as far as it can be before the meter starts (InvalidArgument
// or PermissionDenied naming spec.shown).
Result<std::unique_ptr<OutputSink>> OpenCsvOrJsonlOutput(const OutputSpec& spec,
                                                         const OutputOptions& options);

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_OUTPUTS_CSV_JSONL_H_
