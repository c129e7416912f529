/* Failures of the lower file system: counted (lower_errors in
 * user.kvtierfs.stats) and logged with their errno.
 *
 * A lower call answers two kinds of errors.  Answers about a name
 * (ENOENT, EEXIST, ENOTEMPTY, EXDEV, ...) are the store's business: it
 * acts on them, and a client sees them only as what they mean.  Failures
 * of the file system itself (EIO, ESTALE, ENOSPC, ENOTCONN, EROFS,
 * ETIMEDOUT, ...) are an operator's: each is counted, and logged a line
 * per kind of call and errno at most every 10 s, the next line saying how
 * many more came meanwhile, so that a failing server cannot flood the
 * log. */
#pragma once
#include <stdbool.h>

#include "stats.h"

/* Counts into @stats, and logs, from now on (NULL: no more; before a
 * mount is up a failure is its caller's to report, in one line). */
void kvt_lower_errors_to(struct kvt_stats *stats);
/* @err (a positive errno) from the lower call @op on @name (may be
 * NULL): counted and logged when it is a failure and counting is on.
 * Returns -@err. */
int kvt_lower_failed(const char *op, const char *name, int err);
/* Whether @err (positive) is a failure of the file system, not an answer
 * about a name. */
bool kvt_lower_is_failure(int err);
