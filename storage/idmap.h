/* The id map behind starfa_idmap: original id strings <-> contiguous indices. */
#ifndef STARFA_STORAGE_IDMAP_H
#define STARFA_STORAGE_IDMAP_H

#include "starfa.h"

#include <stddef.h>
#include <stdint.h>

struct starfa_idmap {
	int64_t count;
	/* The names, NUL-terminated one after the other: name i starts at chars + starts[i]
	 * and starts[count] is the bytes in use. */
	char *chars;
	size_t chars_capacity;
	int64_t *starts;
	size_t starts_capacity;
	/* Open addressing with linear probing over a power-of-two table, at most half full.
	 * A slot holds 0 (empty) or (32-bit hash << 32 | index + 1): the hash both places
	 * the slot on growth and skips most string comparisons. */
	uint64_t *slots;
	uint64_t slot_mask;
};

/* An empty map (NULL and STARFA_ENOMEM recorded when out of memory). */
starfa_idmap *idmap_new(void);
/* The index of the name of `len` bytes (no NUL needed), adding it when new: 0, or
 * STARFA_ENOMEM. The name must not contain NUL bytes. */
int idmap_intern(starfa_idmap *map, const char *name, size_t len, int64_t *index);
/* A deep copy (NULL gives NULL without error; NULL and STARFA_ENOMEM on failure). */
int idmap_copy(const starfa_idmap *map, starfa_idmap **out);
void idmap_free(starfa_idmap *map);

#endif
