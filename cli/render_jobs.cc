#include "cli/render.h"

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/internal/render_parts.h"

namespace tidepool::cli {

using internal::bytes_of;
using internal::jobs_table;
using internal::joined;
using internal::render_fields;
using internal::utc_time;

namespace {

// The phase a job is in; "-" before it starts (the API sends "").
std::string phase_of(const Json& job) {
  const std::string phase = display(field(job, "phase"));
  return phase.empty() ? "-" : phase;
}

// The columns a job has in every table of jobs, and its cells there.
std::vector<Column> job_columns() {
  return {{"ID", Align::right}, {"Type"}, {"State"}, {"Impact"}, {"Pri", Align::right}, {"Phase"}};
}

std::vector<std::string> job_cells(const Json& job) {
  return {display(field(job, "id")),       display(field(job, "type")),
          display(field(job, "state")),    display(field(job, "policy")),
          display(field(job, "priority")), phase_of(job)};
}

// From the job's start to its end, or to `now` while it has not ended; "-" before it starts.
std::string running_time(const Json& job, std::time_t now) {
  const Json& started = field(job, "started");
  const Json& ended = field(job, "ended");
  if (!started.is_number_integer()) return "-";
  const std::time_t end = ended.is_number_integer() ? ended.get<std::time_t>() : now;
  const std::time_t start = started.get<std::time_t>();
  // A clock behind the coordinator's would make the time negative.
  return human_duration(end > start ? static_cast<std::uint64_t>(end - start) : 0);
}

}  // namespace

namespace internal {

Table jobs_table(const Json& jobs, std::time_t now) {
  std::vector<Column> columns = job_columns();
  columns.push_back({"Running Time", Align::right});
  Table table(std::move(columns));
  for (const Json& job : as_list(jobs)) {
    std::vector<std::string> cells = job_cells(job);
    cells.push_back(running_time(job, now));
    table.add_row(std::move(cells));
  }
  return table;
}

}  // namespace internal

namespace {

std::vector<std::pair<std::string, std::string>> job_fields(const Json& job) {
  const Json& progress = field(job, "progress");
  return {{"ID", display(field(job, "id"))},
          {"Type", display(field(job, "type"))},
          {"State", display(field(job, "state"))},
          {"Policy", display(field(job, "policy"))},
          {"Priority", display(field(job, "priority"))},
          {"Paths", joined(field(job, "paths"))},
          {"Dry Run", display(field(job, "dry_run"))},
          {"Created", utc_time(field(job, "created"))},
          {"Started", utc_time(field(job, "started"))},
          {"Ended", utc_time(field(job, "ended"))},
          {"Coordinator", display(field(job, "coordinator"))},
          {"Runs", display(field(job, "runs"))},
          {"Phase", phase_of(job)},
          {"Files Scanned", display(field(progress, "files_scanned"))},
          {"Directories Scanned", display(field(progress, "directories_scanned"))},
          {"Files Matched", display(field(progress, "files_matched"))},
          {"Patterns Set", display(field(progress, "patterns_set"))},
          {"Files Moved", display(field(progress, "files_moved"))},
          {"Bytes Moved", bytes_of(field(progress, "bytes_moved"))},
          {"Files Resumed", display(field(progress, "files_resumed"))},
          {"Files Misplaced", display(field(progress, "files_misplaced"))},
          {"Errors", display(field(progress, "errors"))},
          {"Reason", display(field(job, "reason"))}};
}

// The messages the job kept (its first errors), one a line under `heading`, when there are any.
void render_job_errors(std::ostream& out, const Json& job, std::string_view heading) {
  const Json& errors = as_list(field(job, "errors"));
  if (errors.empty()) return;
  out << heading << '\n';
  for (const Json& message : errors) out << "  " << display(message) << '\n';
}

// "1 file", "120 files"; a count that is no number shows as "-".
std::string counted(const Json& count, const std::string& noun) {
  return display(count) + " " + noun + (count == Json(1) ? "" : "s");
}

// Seconds a phase took: whole as sent, fractions to a tenth.
std::string phase_seconds(const Json& seconds) {
  if (!seconds.is_number_float()) return display(seconds);
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", seconds.get<double>());
  return text;
}

}  // namespace

void render_jobs(std::ostream& out, const Json& jobs, std::time_t now) {
  render_listing(out, jobs_table(jobs, now));
}

void render_job(std::ostream& out, const Json& job) {
  render_fields(out, job_fields(job), Align::right);
  render_job_errors(out, job, "\nFirst errors:");
}

void render_job_reports(std::ostream& out, const Json& reports) {
  Table table({{"ID", Align::right},
               {"Type"},
               {"State"},
               {"Ended"},
               {"Files Scanned", Align::right},
               {"Matched", Align::right},
               {"Moved", Align::right},
               {"Misplaced", Align::right},
               {"Errors", Align::right}});
  for (const Json& job : as_list(reports)) {
    const Json& progress = field(job, "progress");
    table.add_row(
        {display(field(job, "id")), display(field(job, "type")), display(field(job, "state")),
         utc_time(field(job, "ended")), display(field(progress, "files_scanned")),
         display(field(progress, "files_matched")), display(field(progress, "files_moved")),
         display(field(progress, "files_misplaced")), display(field(progress, "errors"))});
  }
  render_listing(out, table);
}

void render_job_report(std::ostream& out, const Json& job) {
  render_fields(out, job_fields(job), Align::right);
  out << "\nPhases:\n";
  Table phases({{"Phase"}, {"Seconds", Align::right}});
  for (const Json& phase : as_list(field(job, "phases"))) {
    phases.add_row({display(field(phase, "name")), phase_seconds(field(phase, "seconds"))});
  }
  phases.render(out);
  render_job_errors(out, job, "\nFirst errors:");
}

void render_job_types(std::ostream& out, const Json& types) {
  Table table({{"ID"}, {"Pri", Align::right}, {"Policy"}, {"Enabled"}, {"Schedule"}, {"Next Run"}});
  for (const Json& type : as_list(types)) {
    table.add_row({display(field(type, "name")), display(field(type, "priority")),
                   display(field(type, "policy")), display(field(type, "enabled")),
                   display(field(type, "schedule")), utc_time(field(type, "next_run"))});
  }
  render_listing(out, table);
}

void render_job_type(std::ostream& out, const Json& type) {
  render_fields(out,
                {{"ID", display(field(type, "name"))},
                 {"Description", display(field(type, "description"))},
                 {"Enabled", display(field(type, "enabled"))},
                 {"Policy", display(field(type, "policy"))},
                 {"Schedule", display(field(type, "schedule"))},
                 {"Priority", display(field(type, "priority"))},
                 {"Next Run", utc_time(field(type, "next_run"))}},
                Align::right);
}

void render_job_status(std::ostream& out, const Json& status) {
  const Json& coordinator = field(status, "coordinator");
  if (coordinator.is_null()) {
    out << "No node is running jobs (no leader).\n";
  } else {
    out << "The job engine is running on node " << display(coordinator) << ".\n";
  }
  out << '\n';
  const Json& active = as_list(field(status, "active"));
  if (active.empty()) {
    out << "No running or queued jobs.\n";
  } else {
    Table jobs(job_columns());
    for (const Json& job : active) jobs.add_row(job_cells(job));
    jobs.render(out);
  }
  const Json& recent = as_list(field(status, "recent"));
  if (recent.empty()) {
    out << "\nNo recent job results.\n";
    return;
  }
  out << "\nRecent job results:\n";
  Table results({{"Time"}, {"Job"}, {"Event"}});
  for (const Json& job : recent) {
    results.add_row({utc_time(field(job, "ended")),
                     display(field(job, "type")) + "[" + display(field(job, "id")) + "]",
                     display(field(job, "state"))});
  }
  results.render(out);
}

void render_policy_application(std::ostream& out, const Json& job) {
  const Json& progress = field(job, "progress");
  const std::string files =
      counted(field(progress, "files_scanned"), "file") + " under " + joined(field(job, "paths"));
  const std::string matched = display(field(progress, "files_matched"));
  const std::string patterns = counted(field(progress, "patterns_set"), "access pattern");
  const std::string misplaced = display(field(progress, "files_misplaced"));
  if (field(job, "dry_run") == Json(true)) {
    // A dry run moves nothing: every file it would move counts as misplaced.
    out << "Dry run over " << files << ": " << matched << " match a policy, " << patterns
        << " would be set, " << misplaced << " would move or stay misplaced.\n";
  } else {
    const std::string moved = counted(field(progress, "files_moved"), "file") + " moved (" +
                              bytes_of(field(progress, "bytes_moved")) + ")";
    out << "Applied the file pool policies to " << files << ": " << matched << " matched a policy, "
        << patterns << " set, " << moved << ", " << misplaced << " misplaced.\n";
  }
  render_job_errors(out, job, "Errors:");
}

}  // namespace tidepool::cli
