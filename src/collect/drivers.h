// The drivers' factories, one per scheme (MakeDevice and MakeStreamSource dispatch to them).
// Internal to the collect part.
#ifndef KWATT_SRC_COLLECT_DRIVERS_H_
#define KWATT_SRC_COLLECT_DRIVERS_H_

#include <memory>
#include <vector>

#include "kwatt/collect/config.h"
#include "kwatt/collect/device.h"

namespace kwatt::collect {

// prometheus://HOST:PORT/NAME-NAME-...: GET http://HOST:PORT/metrics (src/collect/http_devices.cc).
Result<std::unique_ptr<Device>> MakePrometheusDevice(const std::vector<MetricDescription>& metrics,
                                                     const DriverEnvironment& environment);
// json://HOST:PORT/PATH#POINTER: GET http://HOST:PORT/PATH, the value at the JSON pointer.
Result<std::unique_ptr<Device>> MakeJsonDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment);
// snmp://COMMUNITY@HOST[:PORT]/OID (src/collect/snmp_device.cc).
Result<std::unique_ptr<Device>> MakeSnmpDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment);
// ipmisensor://USER:PASS@HOST[:PORT]/SENSOR (src/collect/ipmi_device.cc).
Result<std::unique_ptr<Device>> MakeIpmiDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment);
// wattmetre://ID/PATH (src/collect/wattmetre.cc).
Result<std::unique_ptr<StreamSource>> MakeWattmetreSource(
    const std::vector<MetricDescription>& metrics, const DriverEnvironment& environment);

}  // namespace kwatt::collect

#endif  // KWATT_SRC_COLLECT_DRIVERS_H_
