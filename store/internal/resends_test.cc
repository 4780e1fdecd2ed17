// The rule for sending a request again after a `behind` answer (store/internal/backend_links.h).
#include <gtest/gtest.h>

#include "store/internal/backend_links.h"

namespace tidepool::store::internal {
namespace {

TEST(ResendsTest, ARequestGoesAgainUntilItsNodeWasFencedSinceItWasFirstSent) {
  Resends resends;
  EXPECT_TRUE(resends.may_send(4).ok());
  // The node caught up with a view that fenced nobody: its locks and shards are its own still.
  EXPECT_TRUE(resends.may_send(4).ok());
  // It applied its own "down" meanwhile: what the request was sent under may be another's.
  const Status refused = resends.may_send(5);
  EXPECT_EQ(refused.code(), Errc::fenced);
}

}  // namespace
}  // namespace tidepool::store::internal
