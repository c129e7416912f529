/* The blocks other mounts of a shared store have open (evictor.h): each
 * mount with an evictor writes the keys it has pinned (its open blocks'
 * record inodes, which every host of a shared store sees as the same
 * numbers) into staging/<its id>/pins when they change, from its
 * evictor's thread (every KVT_EVICTOR tick at most, never on the path
 * of an open); an evictor reads the other mounts' files when a pass
 * starts and each second while it goes on, and spares the blocks they
 * list.  A block opened elsewhere less than about a second before a pass
 * can still go: that host's reader keeps its bytes (an unlinked file
 * stays readable where it is open), as a reader here does.  A mount
 * that is gone takes its file with its staging directory.  Knows
 * nothing of FUSE. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct kvt_store;
struct kvt_peerpins;

#define KVT_PEERPINS_FILE "pins"
/* How old the other mounts' files may be when a pass asks. */
#define KVT_PEERPINS_READ_US (G_USEC_PER_SEC)

struct kvt_peerpins *kvt_peerpins_new(struct kvt_store *s);
void kvt_peerpins_free(struct kvt_peerpins *p);
/* Writes this mount's file: the keys of @pins (uint64_t *). */
void kvt_peerpins_write(struct kvt_peerpins *p, GHashTable *pins);
/* Reads the other mounts' files again if the last read is older than
 * @max_age_us. */
void kvt_peerpins_read(struct kvt_peerpins *p, gint64 max_age_us);
/* Whether another mount had @key open at the last read. */
bool kvt_peerpins_has(struct kvt_peerpins *p, uint64_t key);
