//! Reference decoders of the peers' IDs, transcribed from each peer's own source (not from
//! vesta-core's layouts), so the tests check vesta-rs's IDs against what the peer's own tools
//! would read. Each keeps the peer's arithmetic: Java `long` shifts for Leaf, Twitter and
//! UidGenerator, Go `uint64` masks for Sonyflake.

/// Leaf's `LeafMonitorController.decodeSnowflakeId` (Meituan-Dianping/Leaf): `(timestamp ms,
/// workerId, sequenceId)`, with `twepoch` in place of Leaf's hard-coded 1288834974657.
pub fn leaf(id: i64, twepoch: i64) -> (i64, i64, i64) {
    let origin_timestamp = (id >> 22) + twepoch;
    let worker_id = (id >> 12) ^ (id >> 22 << 10);
    let sequence = id ^ (id >> 12 << 12);
    (origin_timestamp, worker_id, sequence)
}

/// Twitter's `IdWorker.nextId` (twitter-archive/snowflake, IdWorker.scala) read back:
/// `((timestamp - twepoch) << 22) | (datacenterId << 17) | (workerId << 12) | sequence`, so
/// `(timestamp ms, datacenterId, workerId, sequence)`.
pub fn twitter(id: i64, twepoch: i64) -> (i64, i64, i64, i64) {
    let (sequence_bits, worker_id_bits, datacenter_id_bits) = (12, 5, 5);
    let worker_id_shift = sequence_bits;
    let datacenter_id_shift = sequence_bits + worker_id_bits;
    let timestamp_left_shift = sequence_bits + worker_id_bits + datacenter_id_bits;
    let mask = |bits: i64| -1i64 ^ (-1i64 << bits);
    (
        (id >> timestamp_left_shift) + twepoch,
        (id >> datacenter_id_shift) & mask(datacenter_id_bits),
        (id >> worker_id_shift) & mask(worker_id_bits),
        id & mask(sequence_bits),
    )
}

/// Sonyflake's `Decompose` (sony/sonyflake, sonyflake.go): `(msb, time in 10 ms units since
/// the start time, sequence, machine-id)`.
pub fn sonyflake(id: u64) -> (u64, u64, u64, u64) {
    const BIT_LEN_TIME: u64 = 39;
    const BIT_LEN_SEQUENCE: u64 = 8;
    const BIT_LEN_MACHINE_ID: u64 = 63 - BIT_LEN_TIME - BIT_LEN_SEQUENCE;
    let msb = id >> 63;
    let time = id >> (BIT_LEN_SEQUENCE + BIT_LEN_MACHINE_ID);
    let mask_sequence = ((1u64 << BIT_LEN_SEQUENCE) - 1) << BIT_LEN_MACHINE_ID;
    let sequence = (id & mask_sequence) >> BIT_LEN_MACHINE_ID;
    let mask_machine_id = (1u64 << BIT_LEN_MACHINE_ID) - 1;
    (msb, time, sequence, id & mask_machine_id)
}

/// Sonyflake v2's `Decompose` (sony/sonyflake/v2, sonyflake.go) for its settings' bit lengths:
/// `(time in units since the start time, sequence, machine)`; v2 has no `msb` key.
pub fn sonyflake_v2(id: i64, bits_sequence: u32, bits_machine: u32) -> (i64, i64, i64) {
    let time = id >> (bits_sequence + bits_machine);
    let mask_sequence = ((1i64 << bits_sequence) - 1) << bits_machine;
    let sequence = (id & mask_sequence) >> bits_machine;
    let mask_machine = (1i64 << bits_machine) - 1;
    (time, sequence, id & mask_machine)
}

/// Sonyflake v2's `Compose` (`elapsedTime << (bitsSequence + bitsMachine) | sequence <<
/// bitsMachine | machine`), for checking `make`.
pub fn sonyflake_v2_compose(
    elapsed: i64,
    sequence: i64,
    machine: i64,
    bits_sequence: u32,
    bits_machine: u32,
) -> i64 {
    elapsed << (bits_sequence + bits_machine) | sequence << bits_machine | machine
}

/// UidGenerator's `DefaultUidGenerator.parseUID` (baidu/uid-generator) with its default bits
/// (sign 1, timeBits 28, workerBits 22, seqBits 13): `(timestamp seconds, workerId,
/// sequence)`, `epoch_seconds` in place of its `epochStr`.
pub fn uid_generator(uid: i64, epoch_seconds: i64) -> (i64, i64, i64) {
    let (total_bits, sign_bits, timestamp_bits, worker_id_bits, sequence_bits) =
        (64, 1, 28, 22, 13);
    // Java's `>>>` is a logical shift: shift the bits as unsigned.
    let ushr = |v: i64, n: u32| ((v as u64) >> n) as i64;
    let sequence = ushr(
        uid << (total_bits - sequence_bits),
        total_bits - sequence_bits,
    );
    let worker_id = ushr(
        uid << (timestamp_bits + sign_bits),
        total_bits - worker_id_bits,
    );
    let delta_seconds = ushr(uid, worker_id_bits + sequence_bits);
    (epoch_seconds + delta_seconds, worker_id, sequence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_references_read_ids_their_peers_would_write() {
        // Values composed the way each peer's own generator composes them.
        let twepoch = 1_288_834_974_657i64;
        let leaf_id = (1_700_000_000_000 - twepoch) << 22 | 7 << 12 | 99;
        assert_eq!(leaf(leaf_id, twepoch), (1_700_000_000_000, 7, 99));
        let tw = (1_700_000_000_123 - twepoch) << 22 | 3 << 17 | 21 << 12 | 4095;
        assert_eq!(twitter(tw, twepoch), (1_700_000_000_123, 3, 21, 4095));
        let sf = 123_456u64 << 24 | 200 << 16 | 65_535;
        assert_eq!(sonyflake(sf), (0, 123_456, 200, 65_535));
        let uid = 86_400i64 << 35 | 4_000_000 << 13 | 8191;
        assert_eq!(
            uid_generator(uid, 1_463_673_600),
            (1_463_760_000, 4_000_000, 8191)
        );
    }
}
