// `tide`, the isi-like admin CLI (daemon/admin_api.md is the API it drives). run_tide is the
// whole program but for the process around it, so that tests run command lines in-process.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/admin_client.h"
#include "common/clock.h"
#include "common/status.h"

namespace tidepool::cli {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;  // the command failed: refused, unreachable, ...
// The command line is wrong; nothing was sent, or only looked up (a directory given to
// `filepool apply` without --recurse).
inline constexpr int kExitUsage = 2;

// What `tide` takes from outside its arguments; tests substitute each part.
struct Environment {
  // An environment variable's value; nullopt when it is not set.
  std::function<std::optional<std::string>(const std::string& name)> variable;
  std::filesystem::path current_directory;
  // Opens a transport to the cluster (HTTPS, in the process environment).
  std::function<Result<std::unique_ptr<Transport>>(ConnectionSettings)> connect;
  // The time, for how long a command waits on the cluster; not owned. Tests give a FakeClock,
  // which their `sleep` moves instead of waiting.
  const Clock* clock = nullptr;
  std::function<void(std::chrono::milliseconds)> sleep;
  // Asks the person at the terminal `question` and returns the line answered; nullopt when
  // standard input is not a terminal (a script) or ends, and when unset.
  std::function<std::optional<std::string>(const std::string& question)> ask;
};

// The process's environment variables, current directory, and HTTPS.
Environment process_environment();

// Runs one command line, `args` without the program name. Output goes to `out`, errors (one
// line each, "tide: ...") to `err`; returns the exit status. Never throws.
int run_tide(std::vector<std::string> args, std::ostream& out, std::ostream& err);
int run_tide(std::vector<std::string> args, std::ostream& out, std::ostream& err,
             const Environment& environment);

}  // namespace tidepool::cli
