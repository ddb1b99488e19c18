# The job logic of the control plane (pure: model, SubmitJob, state machine,
# rendering, job environment, node ranges). Included from
# src/control/CMakeLists.txt; lote_control links it too, so that job
# definitions are checked with the same node range parser as SubmitJob.
lote_library(control_jobs
  SOURCES job_model.cc job_submit.cc job_state.cc job_render.cc job_env.cc job_sched.cc
          node_ranges.cc consumables.cc validation.cc
  DEPS lote_common lote_sched)

lote_test(control_jobs_test
  SOURCES job_model_test.cc job_submit_test.cc job_state_test.cc job_render_test.cc
    job_sched_test.cc node_ranges_test.cc consumables_test.cc
  DEPS lote_control_jobs)
