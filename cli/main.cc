#include <iostream>
#include <string>
#include <vector>

#include "cli/tide.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return tidepool::cli::run_tide(std::move(args), std::cout, std::cerr);
}
