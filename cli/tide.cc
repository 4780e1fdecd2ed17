#include "cli/tide.h"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <utility>

#include "cli/commands.h"
#include "cli/https_transport.h"
#include "cli/internal/grammar.h"
#include "cli/requests.h"

namespace tidepool::cli {
namespace {

namespace fs = std::filesystem;

// The deepest command the parser selected (the root when none was).
CLI::App* selected_command(CLI::App& root) {
  CLI::App* app = &root;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return app;
}

// "tide storagepool tiers"
std::string command_path(const CLI::App* app) {
  std::string path;
  for (; app != nullptr; app = app->get_parent()) {
    path = path.empty() ? app->get_name() : app->get_name() + " " + path;
  }
  return path;
}

std::string quoted_list(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "'" : " '") + word + "'";
  return text;
}

// What a parse error says, in one line that names what was expected.
std::string describe_parse_error(CLI::App& root, const CLI::ParseError& e) {
  CLI::App* command = selected_command(root);
  const std::vector<std::string> leftover = root.remaining(true);
  // Option groups are nameless subcommands: not commands.
  const std::function<bool(const CLI::App*)> named = [](const CLI::App* app) {
    return !app->get_name().empty();
  };
  const std::vector<const CLI::App*> choices =
      static_cast<const CLI::App*>(command)->get_subcommands(named);
  if (!choices.empty() && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    // A command group without its command.
    std::string expected;
    for (const CLI::App* choice : choices) {
      expected += (expected.empty() ? "" : ", ") + choice->get_name();
    }
    auto word = std::find_if(leftover.begin(), leftover.end(),
                             [](const std::string& arg) { return !arg.starts_with('-'); });
    std::string problem = word == leftover.end()
                              ? "missing command after '" + command_path(command) + "'"
                              : "unknown command '" + command_path(command) + " " + *word + "'";
    return problem + "; expected one of: " + expected;
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    return "unexpected " + std::string(leftover.size() > 1 ? "arguments " : "argument ") +
           quoted_list(leftover) + " for '" + command_path(command) + "'";
  }
  return e.what();
}

std::string usage_line(const CLI::App* command, const std::string& problem) {
  return "tide: " + problem + " (see '" + command_path(command) + " --help')";
}

int run(std::vector<std::string> args, std::ostream& out, std::ostream& err,
        const Environment& environment) {
  internal::Grammar grammar;
  CLI::App& app = grammar.app();
  std::vector<std::string> filter_flags;
  if (Status taken = take_filter_flags(args, filter_flags); !taken.ok()) {
    err << usage_line(&app, taken.message()) << '\n';
    return kExitUsage;
  }
  grammar.set_filter_flags(std::move(filter_flags));
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::Success& help) {
    return app.exit(help, out, err);
  } catch (const CLI::ParseError& e) {
    err << usage_line(selected_command(app), describe_parse_error(app, e)) << '\n';
    return kExitUsage;
  }
  Result<GlobalOptions> options = grammar.global_options();
  if (!options.ok()) {
    err << usage_line(&app, options.status().message()) << '\n';
    return kExitUsage;
  }
  CLI::App* command = selected_command(app);
  Result<internal::Operation> operation = grammar.command_of(command)();
  if (!operation.ok()) {
    err << usage_line(command, operation.status().message()) << '\n';
    return kExitUsage;
  }
  Session session(environment, std::move(options).value(), out, err);
  if (Status status = (*operation)(session); !status.ok()) {
    err << "tide: " << status.message() << '\n';
    // A directory where the command takes a file: the command line is wrong, and nothing
    // changed. The admin API never answers with is_a_directory, so only a command's own check
    // says it.
    return status.code() == Errc::is_a_directory ? kExitUsage : kExitFailure;
  }
  return kExitSuccess;
}

}  // namespace

Environment process_environment() {
  std::error_code ec;
  fs::path current_directory = fs::current_path(ec);
  return Environment{
      .variable = [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      },
      .current_directory = ec ? fs::path(".") : std::move(current_directory),
      .connect = make_https_transport,
      .clock = &real_clock(),
      .sleep = [](std::chrono::milliseconds duration) { std::this_thread::sleep_for(duration); },
      .ask = [](const std::string& question) -> std::optional<std::string> {
        if (::isatty(STDIN_FILENO) == 0) return std::nullopt;
        // On the terminal even when standard output goes to a file, as rm -i asks.
        std::cerr << question << std::flush;
        std::string answer;
        if (!std::getline(std::cin, answer)) return std::nullopt;
        return answer;
      },
  };
}

int run_tide(std::vector<std::string> args, std::ostream& out, std::ostream& err) {
  return run_tide(std::move(args), out, err, process_environment());
}

int run_tide(std::vector<std::string> args, std::ostream& out, std::ostream& err,
             const Environment& environment) {
  // The boundary: CLI11, nlohmann::json and the standard library report by exception, and
  // none may end the process with a stack trace.
  try {
    return run(std::move(args), out, err, environment);
  } catch (const std::exception& e) {
    err << "tide: unexpected error: " << e.what() << '\n';
  } catch (...) {
    err << "tide: unexpected error\n";
  }
  return kExitFailure;
}

}  // namespace tidepool::cli
