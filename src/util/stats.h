/* The mount's counters, shown on the mount root as user.kvtierfs.stats.
 * Each is a relaxed atomic: the hot paths pay one uncontended-in-practice
 * add and never take a lock. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define KVT_STATS(X)                                                          \
	X(lookups)     /* LOOKUP requests */                                 \
	X(hits)        /* ... that found a name */                           \
	X(misses)      /* ... that did not (ENOENT) */                       \
	X(stores)      /* versions published */                              \
	X(dedups)      /* ... whose bytes an existing object already held */ \
	X(loads)       /* opens for reading of published files */            \
	X(verified)    /* objects hashed and found intact */                 \
	X(copy_waits)  /* opens that waited for room for a verified copy */  \
	X(uncopied)    /* opens verify=always served from the lower file */  \
	X(torn_size)   /* objects missing or of the wrong size */            \
	X(torn_hash)   /* objects whose bytes do not match their hash */     \
	X(short_reads) /* reads that found fewer bytes than recorded */      \
	X(purges)      /* names removed because their object was torn */     \
	X(bytes_in)    /* bytes written by clients */                        \
	X(bytes_out)   /* bytes read by clients */                           \
	X(aligned_writes) /* WRITEs whose bytes arrived page-aligned */      \
	X(unlinks)     /* published names removed by clients (unlink) */     \
	X(objects)     /* new objects written by this mount */               \
	X(bytes_stored) /* bytes of those objects */                         \
	X(orphans_reclaimed) /* object links no record used, removed */      \
	X(orphan_bytes_reclaimed) /* bytes of the objects that went */       \
	X(reclaim_passes) /* reclamation passes that swept */                \
	X(reclaim_aborted) /* ... that stopped before sweeping */            \
	X(reclaim_deferred) /* ... not made: another mount reclaims */      \
	X(scrub_objects) /* objects the scrub hashed (scrub.h) */           \
	X(scrub_bytes) /* ... their bytes */                                 \
	X(scrub_rotten) /* ... that no longer hashed to their name: removed */ \
	X(scrub_passes) /* scrub passes over the whole store */             \
	X(evictions)   /* names the evictor removed (evictor.h) */          \
	X(evicted_bytes) /* ... the bytes of their objects */                \
	X(evict_passes) /* eviction passes */                                \
	X(evict_pass_us) /* ... the time they took, microseconds */          \
	X(room_waits)  /* stores that waited for the evictor to make room */ \
	X(room_wait_us) /* ... the time they waited, microseconds */         \
	X(lower_errors) /* failures of the lower file system (lowerr.h) */

enum kvt_stat {
#define KVT_STAT_ENUM(n) KVT_STAT_##n,
	KVT_STATS(KVT_STAT_ENUM)
#undef KVT_STAT_ENUM
	KVT_STAT_COUNT
};

struct kvt_stats {
	/* One cache line each, so that threads bumping different counters
	 * do not bounce a shared line. */
	struct {
		uint64_t v;
	} __attribute__((aligned(64))) c[KVT_STAT_COUNT];
};

static inline void kvt_stat_add(struct kvt_stats *s, enum kvt_stat which, uint64_t n)
{
	__atomic_fetch_add(&s->c[which].v, n, __ATOMIC_RELAXED);
}

static inline uint64_t kvt_stat_get(const struct kvt_stats *s, enum kvt_stat which)
{
	return __atomic_load_n(&s->c[which].v, __ATOMIC_RELAXED);
}

/* "name value\n" per counter. */
GString *kvt_stats_format(const struct kvt_stats *s);
/* The same without the counters that tell whether bytes were stored
 * before (dedups, objects, bytes_stored, orphans_reclaimed,
 * orphan_bytes_reclaimed): for a caller who may not learn what others
 * store. */
GString *kvt_stats_format_public(const struct kvt_stats *s);
