#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tidepool {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error(Errc::not_found, "cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<std::string> read_secret_file(const std::string& path) {
  TP_ASSIGN_OR_RETURN(std::string secret, read_file(path));
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  return secret;
}

Status write_file(const std::string& path, const std::string& contents, mode_t mode) {
  const std::string aside = path + ".new";
  const int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return error(Errc::io_error, "cannot create " + aside + ": " + std::strerror(errno));
  const bool written = ::write(fd, contents.data(), contents.size()) ==
                           static_cast<ssize_t>(contents.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(aside.c_str(), path.c_str()) != 0) {
    return error(Errc::io_error, "cannot write " + path + ": " + std::strerror(errno));
  }
  const int dir = ::open(std::filesystem::path(path).parent_path().c_str(),
                         O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {};
}

}  // namespace tidepool
