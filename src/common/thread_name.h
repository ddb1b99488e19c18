// NameThisThread: the name the calling thread shows in `top -H`, `ps -L`,
// /proc/<pid>/task/<tid>/comm, gdb and perf (Linux keeps 15 characters).
// lote's long-lived threads are named after their role ("lote-store",
// "lote-jobs", ...), so that an operator and bench/jobs/server_cpu.sh can
// tell which part of the server spends the CPU.
#pragma once

#include <pthread.h>

#include <string>
#include <thread>
#include <utility>

namespace lote {

inline void NameThisThread(const std::string& name) {
  (void)::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

// A thread that names itself `name`, then runs `fn`.
template <typename Fn>
std::thread NamedThread(std::string name, Fn fn) {
  return std::thread([name = std::move(name), fn = std::move(fn)]() mutable {
    NameThisThread(name);
    fn();
  });
}

}  // namespace lote
