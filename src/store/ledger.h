/* The usage other mounts of a shared store add (usage.h): each mount with
 * a budget writes the bytes its objects moved since it opened into
 * staging/<its id>/usage as soon as they change (from its first to its
 * last move: a count another mount makes then reads a number that agrees
 * with the objects it counts), and reads the other mounts' files once a
 * second.  What the others moved since this mount's last
 * count of objects/ is part of its usage at once, not at its next count:
 * one budget for the store, whatever host stores.  A mount that is gone
 * (its staging directory removed) leaves what it moved in: its objects
 * stay.  What another mount moves while this one counts (in the fan-out
 * directories the count has yet to look at) is counted twice until the
 * next count; this mount's own moves are not (usage.c).  One listing of staging/ and one small read per other mount a
 * second.  Knows nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdint.h>

struct kvt_store;
struct kvt_ledger;

/* The file in a mount's staging directory. */
#define KVT_LEDGER_FILE "usage"

/* Writes this mount's file, 0 moves so far. */
struct kvt_ledger *kvt_ledger_new(struct kvt_store *s);
void kvt_ledger_free(struct kvt_ledger *l);
/* Writes this mount's @moves, if they changed. */
void kvt_ledger_write(struct kvt_ledger *l, int64_t moves);
/* Reads the others': the bytes they moved since the last
 * kvt_ledger_rebase. */
int64_t kvt_ledger_read(struct kvt_ledger *l);
/* Before a count of objects/: what the others moved so far is in it. */
void kvt_ledger_rebase(struct kvt_ledger *l);
