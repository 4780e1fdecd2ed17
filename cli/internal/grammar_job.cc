#include "cli/internal/grammar.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tidepool::cli::internal {

void Grammar::add_job_commands() {
  CLI::App* job = add_group(app_, "job", "The job engine: jobs, their types and reports");
  add_jobs_commands(*job);
  add_job_type_commands(*job);
  add_job_report_commands(*job);
  add_format_option(add_command(*job, "status",
                                "The node running jobs, the jobs not ended and the last ones ended",
                                [this]() -> Result<Operation> {
                                  return Operation([format = format()](Session& session) {
                                    return show_job_status(session, format);
                                  });
                                }));
}

void Grammar::add_job_priority_and_policy(CLI::App* command, std::optional<std::string>& priority,
                                          std::optional<std::string>& policy) {
  command->add_option("--priority", priority, "1 (runs first) to 10")->type_name("1-10");
  command
      ->add_option("--policy", policy,
                   "Impact policy: how hard it may work (OFF_HOURS: not Monday-Friday "
                   "08:00-18:00 UTC)")
      ->type_name("LOW|MEDIUM|HIGH|OFF_HOURS");
}

void Grammar::add_jobs_commands(CLI::App& job) {
  CLI::App* jobs = add_group(job, "jobs", "Jobs: started by hand or by their type's schedule");
  JobStartOptions& options = arguments_.job_start_options;
  CLI::App* start = add_command(*jobs, "start", "Start a job now", [this]() -> Result<Operation> {
    TP_ASSIGN_OR_RETURN(Json body, job_start_body(arguments_.name, arguments_.job_start_options));
    return Operation([body](Session& session) { return start_job(session, body); });
  });
  start->add_option("TYPE", arguments_.name, "The job's type (see 'tide job types list')")
      ->required();
  add_job_priority_and_policy(start, options.priority, options.policy);
  start->add_option("--paths", options.paths, "Paths under /ifs to work on (SmartPoolsTree)")
      ->type_name("PATH");
  start->add_flag("--dry-run", options.dry_run, "Count what the job would change; change nothing");

  add_format_option(
      add_command(*jobs, "list", "List the jobs not ended", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_jobs(session, format); });
      }));
  CLI::App* view = add_command(*jobs, "view", "Show a job", [this]() -> Result<Operation> {
    TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("job id", arguments_.id));
    return Operation(
        [id, format = format()](Session& session) { return view_job(session, id, format); });
  });
  view->add_option("ID", arguments_.id, "The job's id")->required();
  add_format_option(view);

  struct Change {
    const char* name;
    const char* description;
    JobChange change;
  };
  for (const Change& change :
       {Change{"pause", "Pause a job not ended", JobChange::pause},
        Change{"resume", "Resume a paused job: it runs again when its turn comes",
               JobChange::resume},
        Change{"cancel", "Cancel a job not ended", JobChange::cancel}}) {
    add_command(*jobs, change.name, change.description,
                [this, change = change.change]() -> Result<Operation> {
                  TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("job id", arguments_.id));
                  return Operation(
                      [id, change](Session& session) { return change_job(session, id, change); });
                })
        ->add_option("ID", arguments_.id, "The job's id")
        ->required();
  }
}

void Grammar::add_job_type_commands(CLI::App& job) {
  CLI::App* types = add_group(job, "types", "Job types: their schedule, priority and policy");
  add_format_option(
      add_command(*types, "list", "List the job types", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_job_types(session, format); });
      }));
  CLI::App* view = add_command(*types, "view", "Show a job type", [this]() -> Result<Operation> {
    TP_RETURN_IF_ERROR(check_name("job type", arguments_.name));
    return Operation([name = arguments_.name, format = format()](Session& session) {
      return view_job_type(session, name, format);
    });
  });
  view->add_option("NAME", arguments_.name, "The type's name")->required();
  add_format_option(view);

  JobTypeChanges& changes = arguments_.job_type_changes;
  CLI::App* modify = add_command(
      *types, "modify", "Change a job type's schedule, priority, policy or whether it is enabled",
      [this]() -> Result<Operation> {
        TP_RETURN_IF_ERROR(check_name("job type", arguments_.name));
        TP_ASSIGN_OR_RETURN(Json body, job_type_modify_body(arguments_.job_type_changes));
        return Operation([name = arguments_.name, body](Session& session) {
          return modify_job_type(session, name, body);
        });
      });
  modify->add_option("NAME", arguments_.name, "The type's name")->required();
  modify
      ->add_option("--schedule", changes.schedule,
                   "When it starts, in UTC: 'every day at 22:00', 'every Sunday at 23:00', "
                   "'every 6 hours', ...")
      ->type_name("TEXT");
  modify->add_flag("--clear-schedule", changes.clear_schedule, "Start it by hand only");
  add_job_priority_and_policy(modify, changes.priority, changes.policy);
  modify->add_option("--enabled", changes.enabled, "Whether its schedule starts it")
      ->type_name("true|false");
}

void Grammar::add_job_report_commands(CLI::App& job) {
  CLI::App* reports = add_group(job, "reports", "What ended jobs did (the last 50)");
  add_format_option(add_command(
      *reports, "list", "List the ended jobs, newest first", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_job_reports(session, format); });
      }));
  CLI::App* view = add_command(
      *reports, "view", "Show an ended job and its phases", [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("job id", arguments_.id));
        return Operation([id, format = format()](Session& session) {
          return view_job_report(session, id, format);
        });
      });
  view->add_option("ID", arguments_.id, "The job's id")->required();
  add_format_option(view);
}

}  // namespace tidepool::cli::internal
