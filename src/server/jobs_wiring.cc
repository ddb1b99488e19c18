// Wires the job layer (SubmitJob ... TerminateJob and the job loop running
// jobs as local processes) into `lote server`.
#include "server/jobs_service.h"

namespace {
lote::server::ServerExtensionRegistrar jobs_registrar(lote::server::JobsExtension());
}  // namespace
