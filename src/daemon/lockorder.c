/* The run-time lock order check (lockorder.h), built with
 * --enable-lock-checks: each thread keeps the locks it holds, and each
 * acquisition is checked before the thread can block on it. */
#include "lockorder.h"

#ifdef KVT_LOCK_CHECKS
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_HELD 8

struct held {
	enum kvt_lock_rank rank;
	const void *lock;
};

static __thread struct held held[MAX_HELD];
static __thread int n_held;

static G_NORETURN void violation(const char *what, enum kvt_lock_rank rank,
				 const void *lock)
{
	fprintf(stderr, "kvtierfs: lock order violation: %s: taking rank %d (%p) while holding",
		what, rank, lock);
	for (int i = 0; i < n_held; i++)
		fprintf(stderr, " rank %d (%p)", held[i].rank, held[i].lock);
	fputc('\n', stderr);
	abort();
}

void kvt_lock_note(enum kvt_lock_rank rank, const void *lock)
{
	bool tree = false;

	for (int i = 0; i < n_held; i++)
		tree |= held[i].rank == KVT_RANK_TREE;
	for (int i = 0; i < n_held; i++) {
		if (held[i].lock == lock)
			violation("taken twice", rank, lock);
		if (held[i].rank < rank)
			continue;
		/* Two directories: rename's pair, in address order. */
		if (held[i].rank == KVT_RANK_DIR && rank == KVT_RANK_DIR && tree &&
		    (const char *)held[i].lock < (const char *)lock)
			continue;
		violation("out of order", rank, lock);
	}
	if (n_held == MAX_HELD)
		violation("too many locks", rank, lock);
	held[n_held++] = (struct held){ rank, lock };
}

void kvt_lock_unnote(const void *lock)
{
	for (int i = n_held - 1; i >= 0; i--) {
		if (held[i].lock != lock)
			continue;
		held[i] = held[--n_held];
		return;
	}
	fprintf(stderr, "kvtierfs: lock order: releasing %p, which is not held\n", lock);
	abort();
}

void kvt_lock_assert_none(const char *what)
{
	if (n_held)
		violation(what, 0, NULL);
}
#endif
