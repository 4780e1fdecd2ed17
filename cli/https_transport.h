// The Transport `tide` uses: HTTPS (Boost.Beast over OpenSSL), one connection per request.
#pragma once

#include <memory>

#include "cli/admin_client.h"
#include "common/status.h"

namespace tidepool::cli {

// HTTPS to the addresses in order: a request goes to the first that accepts a connection
// within 2 s, and must be answered within the settings' timeout. invalid_argument when the CA
// certificate is not PEM or the token cannot go in a header.
Result<std::unique_ptr<Transport>> make_https_transport(ConnectionSettings settings);

}  // namespace tidepool::cli
