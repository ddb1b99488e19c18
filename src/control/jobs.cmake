# The job logic of the control plane (pure: model, SubmitJob, state machine,
# rendering, job environment). Included from src/control/CMakeLists.txt.
lote_library(control_jobs
  SOURCES job_model.cc job_submit.cc job_state.cc
  DEPS lote_common)

lote_test(control_jobs_test
  SOURCES job_model_test.cc job_submit_test.cc job_state_test.cc
  DEPS lote_control_jobs)
