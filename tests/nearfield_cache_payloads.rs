//! The table cache's payloads (docs/nearfield_cache.md): every flipped byte
//! a checksum error naming the key, truncated and foreign payloads, a
//! payload moved under another key, one encoded here from the documented
//! layout (equal to the crate's; with a NaN and a valid checksum refused),
//! a corrupt entry's hint and its replacement; and files that are not
//! caches, left untouched.
//!
//! Tables are small (q ≤ 2 when built by quadrature, synthetic values
//! through `from_parts` otherwise) so the whole file runs in a few seconds.
mod common;
use common::nearfield_cache::{
    assert_dense_eq, assert_reduced_eq, err_text, get_dense, n_cases, next_up, only_payload, quad,
    raw, set_only_payload, snapshot, synth_dense,
};
use hipkern::nearfield::{
    CacheKey, CachedTable, Kernel, ReducedTable, SymmetryMode, TableCache, PAYLOAD_FORMAT_VERSION,
    PAYLOAD_MAGIC,
};
use rusqlite::Connection;

/// FNV-1a 64 as docs/nearfield_cache.md defines it.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A payload encoded from the documented layout (docs/nearfield_cache.md,
/// "The payload (format 1), byte by byte"), independent of the crate's
/// encoder.
fn doc_payload(key: &CacheKey, dim: usize, q: usize, ids: &[u32], values: &[f64]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"HKNFTAB\0");
    b.extend_from_slice(&1u32.to_le_bytes());
    b.push(match key.symmetry() {
        SymmetryMode::None => 0,
        SymmetryMode::Full => 1,
    });
    b.push(dim as u8);
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&(q as u32).to_le_bytes());
    b.extend_from_slice(&(n_cases(dim) as u32).to_le_bytes());
    b.extend_from_slice(&fnv1a64(key.text().as_bytes()).to_le_bytes());
    b.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    b.extend_from_slice(&(values.len() as u64).to_le_bytes());
    for id in ids {
        b.extend_from_slice(&id.to_le_bytes());
    }
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let sum = fnv1a64(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

// ---------------------------------------------------------------------------
// Corrupt, truncated and hand-encoded payloads
// ---------------------------------------------------------------------------

#[test]
fn every_flipped_payload_byte_is_a_checksum_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kernel::yukawa(2, 0.25).unwrap();
    // q = 1: 33 values, a 320-byte dense payload; the reduced one has ids.
    let dense = synth_dense(&k, 1, 1.0, &quad(), 31);
    let red = ReducedTable::from_dense(&synth_dense(
        &Kernel::laplace(2).unwrap(),
        1,
        1.0,
        &quad(),
        32,
    ))
    .unwrap();
    assert!(!red.reduced_entry_ids().is_empty());
    for which in 0..2 {
        let p = dir.path().join(format!("flip{which}.sqlite"));
        let c = TableCache::open(&p).unwrap();
        let key = if which == 0 {
            c.put_dense(&dense).unwrap();
            CacheKey::of_dense(&dense)
        } else {
            c.put_reduced(&red).unwrap();
            CacheKey::of_reduced(&red)
        };
        let r = raw(&p);
        let good = only_payload(&r);
        for i in 0..good.len() {
            for mask in [0x01u8, 0x80] {
                let mut b = good.clone();
                b[i] ^= mask;
                set_only_payload(&r, &b);
                let e = err_text(c.get(&key));
                assert!(e.contains("checksum"), "byte {i}: {e}");
                assert!(e.contains(&key.text()), "byte {i}: {e}");
            }
        }
        set_only_payload(&r, &good);
        match (which, c.get(&key).unwrap()) {
            (0, Some(CachedTable::Dense(t))) => assert_dense_eq(&t, &dense),
            (1, Some(CachedTable::Reduced(t))) => assert_reduced_eq(&t, &red),
            (_, other) => panic!("{other:?}"),
        }
    }
}

#[test]
fn truncated_and_foreign_payloads_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trunc.sqlite");
    let t = synth_dense(&Kernel::laplace(2).unwrap(), 2, 1.0, &quad(), 41);
    let key = CacheKey::of_dense(&t);
    let c = TableCache::open(&path).unwrap();
    c.put_dense(&t).unwrap();
    let r = raw(&path);
    let good = only_payload(&r);
    let n = good.len();
    for len in [0, 1, 8, 47, 55, 56, 57, n / 2, n - 9, n - 8, n - 1] {
        let changed = r
            .execute(
                "UPDATE nearfield_cache SET payload = substr(payload, 1, ?1)",
                [len as i64],
            )
            .unwrap();
        assert_eq!(changed, 1);
        assert_eq!(only_payload(&r).len(), len);
        let e = err_text(c.get(&key));
        assert!(e.contains("truncated"), "length {len}: {e}");
        assert!(e.contains(&key.text()), "length {len}: {e}");
        set_only_payload(&r, &good);
    }
    // One byte too many (a valid payload with a byte appended).
    let mut long = good.clone();
    long.push(0);
    set_only_payload(&r, &long);
    assert!(err_text(c.get(&key)).contains("checksum"));
    // Not a blob, a blob of zeros, text.
    r.execute("UPDATE nearfield_cache SET payload = zeroblob(400)", [])
        .unwrap();
    let e = err_text(c.get(&key));
    assert!(e.contains("checksum") && e.contains("magic"), "{e}");
    r.execute("UPDATE nearfield_cache SET payload = 'a text payload'", [])
        .unwrap();
    err_text(c.get(&key));
    r.execute("UPDATE nearfield_cache SET payload = 42", [])
        .unwrap();
    err_text(c.get(&key));
    set_only_payload(&r, &good);
    assert_dense_eq(&get_dense(&c, &t), &t);
}

#[test]
fn a_payload_moved_under_another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moved.sqlite");
    // Two Yukawa λ one ulp apart: same sizes, different keys.
    let a = synth_dense(&Kernel::yukawa(2, 1.5).unwrap(), 2, 1.0, &quad(), 51);
    let b = synth_dense(
        &Kernel::yukawa(2, next_up(1.5)).unwrap(),
        2,
        1.0,
        &quad(),
        52,
    );
    let c = TableCache::open(&path).unwrap();
    c.put_dense(&a).unwrap();
    c.put_dense(&b).unwrap();
    let r = raw(&path);
    r.execute(
        "UPDATE nearfield_cache SET payload = (SELECT payload FROM nearfield_cache \
         WHERE lambda_bits = '3ff8000000000000') WHERE lambda_bits = '3ff8000000000001'",
        [],
    )
    .unwrap();
    assert_dense_eq(&get_dense(&c, &a), &a);
    let e = err_text(c.get(&CacheKey::of_dense(&b)));
    assert!(e.contains("does not match the row's key"), "{e}");
    assert!(e.contains(&CacheKey::of_dense(&b).text()), "{e}");
}

/// Payloads encoded here from the documented layout: equal to what the
/// crate writes, and with a NaN (valid checksum) refused as "not finite".
#[test]
fn documented_layout_matches_and_nan_payloads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kernel::laplace(3)
        .unwrap()
        .axis_source_derivative(2)
        .unwrap();
    let dense = synth_dense(&k, 1, 0.75, &quad(), 61);
    let red = ReducedTable::from_dense(&synth_dense(
        &Kernel::yukawa(2, 3.0).unwrap(),
        2,
        0.5,
        &quad(),
        62,
    ))
    .unwrap();
    assert_eq!(PAYLOAD_MAGIC, *b"HKNFTAB\0");
    assert_eq!(PAYLOAD_FORMAT_VERSION, 1);
    for which in 0..2 {
        let p = dir.path().join(format!("doc{which}.sqlite"));
        let c = TableCache::open(&p).unwrap();
        let (key, dim, q, ids, values) = if which == 0 {
            c.put_dense(&dense).unwrap();
            (
                CacheKey::of_dense(&dense),
                3,
                1,
                vec![],
                dense.data().to_vec(),
            )
        } else {
            c.put_reduced(&red).unwrap();
            (
                CacheKey::of_reduced(&red),
                2,
                2,
                red.reduced_entry_ids().to_vec(),
                red.reduced_data().to_vec(),
            )
        };
        let r = raw(&p);
        let stored = only_payload(&r);
        let mine = doc_payload(&key, dim, q, &ids, &values);
        assert!(
            stored == mine,
            "the crate's payload differs from the documented layout (first at byte {:?})",
            stored.iter().zip(&mine).position(|(a, b)| a != b)
        );
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut v = values.clone();
            let i = v.iter().position(|&x| x != 0.0).unwrap();
            v[i] = bad;
            set_only_payload(&r, &doc_payload(&key, dim, q, &ids, &v));
            let e = err_text(c.get(&key));
            assert!(e.contains("not finite"), "{e}");
            assert!(e.contains(&key.text()), "{e}");
        }
        // Valid checksums around other wrong fields.
        let mut wrong_len = values.clone();
        wrong_len.pop();
        let mut wrong_ids = ids.clone();
        wrong_ids.pop();
        let cases: Vec<Vec<u8>> = vec![
            // One value short (dense) or one id and one value short (reduced).
            doc_payload(&key, dim, q, &wrong_ids, &wrong_len),
            // Another dimension's header.
            doc_payload(&key, 5 - dim, q, &ids, &values),
            // The key hash of another key (same kind, dim and q).
            doc_payload(
                &CacheKey::new(
                    &Kernel::constant(dim).unwrap(),
                    q,
                    1.0,
                    &quad(),
                    key.symmetry(),
                )
                .unwrap(),
                dim,
                q,
                &ids,
                &values,
            ),
            // Format 2, resealed.
            {
                let mut b = doc_payload(&key, dim, q, &ids, &values);
                b[8] = 2;
                let n = b.len() - 8;
                let s = fnv1a64(&b[..n]);
                b[n..].copy_from_slice(&s.to_le_bytes());
                b
            },
            // The other kind, resealed.
            {
                let mut b = doc_payload(&key, dim, q, &ids, &values);
                b[12] ^= 1;
                let n = b.len() - 8;
                let s = fnv1a64(&b[..n]);
                b[n..].copy_from_slice(&s.to_le_bytes());
                b
            },
            // Reserved bytes set, resealed.
            {
                let mut b = doc_payload(&key, dim, q, &ids, &values);
                b[14] = 1;
                let n = b.len() - 8;
                let s = fnv1a64(&b[..n]);
                b[n..].copy_from_slice(&s.to_le_bytes());
                b
            },
        ];
        for (j, b) in cases.iter().enumerate() {
            set_only_payload(&r, b);
            let e = err_text(c.get(&key));
            assert!(e.contains(&key.text()), "case {j}: {e}");
        }
        if which == 1 {
            // Ids out of order, and a zero-by-symmetry orbit with a value.
            let mut sw = ids.clone();
            sw.swap(0, 1);
            set_only_payload(&r, &doc_payload(&key, dim, q, &sw, &values));
            err_text(c.get(&key));
            if red.zero_orbits() > 0 {
                // Find a zero orbit: a representative whose value is 0.
                let j = values.iter().position(|&x| x == 0.0).unwrap();
                let mut v = values.clone();
                v[j] = 1.0;
                set_only_payload(&r, &doc_payload(&key, dim, q, &ids, &v));
                err_text(c.get(&key));
            }
        }
        set_only_payload(&r, &mine);
        assert!(c.get(&key).unwrap().is_some());
    }
}

// ---------------------------------------------------------------------------
// Files that are not (current) caches
// ---------------------------------------------------------------------------

#[test]
fn files_that_are_not_caches_are_errors_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    // An SQLite database of something else.
    let other = dir.path().join("other.sqlite");
    {
        let c = Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1);")
            .unwrap();
    }
    // A file that is not SQLite at all.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "this is not an SQLite database\n".repeat(200)).unwrap();
    for p in [&other, &text] {
        let before = snapshot(p);
        let e = err_text(TableCache::open(p));
        assert!(e.contains(&p.display().to_string()), "{e}");
        let e2 = err_text(TableCache::open_read_only(p));
        assert!(!e2.is_empty());
        if p == &other {
            assert!(e.contains("not a table cache"), "{e}");
            assert!(e2.contains("not a table cache"), "{e2}");
        } else {
            assert!(e.contains("not a database"), "{e}");
        }
        assert!(snapshot(p) == before, "{} changed", p.display());
    }
    // An empty file: read-only refuses it; writable makes it a cache.
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let e = err_text(TableCache::open_read_only(&empty));
    assert!(e.contains("empty"), "{e}");
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    assert!(TableCache::open(&empty).unwrap().is_empty().unwrap());
    // A folder.
    err_text(TableCache::open(dir.path()));
    err_text(TableCache::open_read_only(dir.path()));
    // A meta table without the 2.x layout, and a malformed version.
    let odd = dir.path().join("odd.sqlite");
    {
        let c = Connection::open(&odd).unwrap();
        c.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('schema_version', '2.1.0');",
        )
        .unwrap();
    }
    let before = snapshot(&odd);
    assert!(err_text(TableCache::open(&odd)).contains("not the 2.x layout"));
    assert!(err_text(TableCache::open_read_only(&odd)).contains("not the 2.x layout"));
    Connection::open(&odd)
        .unwrap()
        .execute(
            "UPDATE meta SET value = '2.1' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let before2 = snapshot(&odd);
    assert!(before2 != before);
    assert!(err_text(TableCache::open(&odd)).contains("MAJOR.MINOR.PATCH"));
    assert!(err_text(TableCache::open_read_only(&odd)).contains("MAJOR.MINOR.PATCH"));
    assert!(snapshot(&odd) == before2);
}

// ---------------------------------------------------------------------------
// The way out of a corrupt entry
// ---------------------------------------------------------------------------

/// A corrupt entry is an error carrying the hint; removing it (or putting
/// the table again, an upsert) makes the key usable again.
#[test]
fn a_corrupt_entry_says_how_to_replace_it_and_can_be_replaced() {
    use hipkern::nearfield::CORRUPT_ENTRY_HINT;
    assert_eq!(
        CORRUPT_ENTRY_HINT,
        "rerun with --rebuild to build it again and replace the entry"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.sqlite");
    let t = synth_dense(&Kernel::laplace(2).unwrap(), 2, 1.0, &quad(), 71);
    let other = synth_dense(&Kernel::laplace(2).unwrap(), 1, 1.0, &quad(), 72);
    let key = CacheKey::of_dense(&t);
    let c = TableCache::open(&path).unwrap();
    c.put_dense(&t).unwrap();
    c.put_dense(&other).unwrap();
    let r = raw(&path);
    let corrupt = |how: &str| {
        let sql = match how {
            "flip" => "UPDATE nearfield_cache SET payload = zeroblob(400) WHERE q = 2",
            "truncate" => "UPDATE nearfield_cache SET payload = substr(payload, 1, 30) WHERE q = 2",
            _ => "UPDATE nearfield_cache SET payload = 'text' WHERE q = 2",
        };
        assert_eq!(r.execute(sql, []).unwrap(), 1);
    };
    for how in ["flip", "truncate", "text"] {
        corrupt(how);
        let e = err_text(c.get(&key));
        assert!(e.contains(CORRUPT_ENTRY_HINT), "{how}: {e}");
        assert!(e.contains(&key.text()), "{how}: {e}");
        // Removing the entry: the key is absent, the other table untouched.
        assert!(c.remove(&key).unwrap());
        assert!(!c.remove(&key).unwrap());
        assert!(c.get(&key).unwrap().is_none());
        assert_eq!(c.len().unwrap(), 1);
        assert_dense_eq(&get_dense(&c, &other), &other);
        c.put_dense(&t).unwrap();
        assert_dense_eq(&get_dense(&c, &t), &t);
        // Replacing it in place (what --rebuild does): a put over it.
        corrupt(how);
        assert!(err_text(c.get(&key)).contains(CORRUPT_ENTRY_HINT));
        c.put_dense(&t).unwrap();
        assert_dense_eq(&get_dense(&c, &t), &t);
        assert_eq!(c.len().unwrap(), 2);
    }
    // A reduced entry likewise.
    let red = ReducedTable::from_dense(&t).unwrap();
    let rkey = CacheKey::of_reduced(&red);
    c.put_reduced(&red).unwrap();
    r.execute(
        "UPDATE nearfield_cache SET payload = zeroblob(64) WHERE symmetry = 'full'",
        [],
    )
    .unwrap();
    assert!(err_text(c.get(&rkey)).contains(CORRUPT_ENTRY_HINT));
    assert!(c.remove(&rkey).unwrap());
    assert!(c.get(&rkey).unwrap().is_none());
    // A read-only handle removes nothing.
    drop(c);
    let ro = TableCache::open_read_only(&path).unwrap();
    let e = err_text(ro.remove(&key));
    assert!(e.contains("read-only"), "{e}");
    assert_dense_eq(&get_dense(&ro, &t), &t);
}
