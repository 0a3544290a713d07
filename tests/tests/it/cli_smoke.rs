//! The binary starts and issues on its embedded default.

use vesta_tests::bin::vesta_cmd;

#[test]
fn gen_prints_one_id_by_default() {
    let out = vesta_cmd(["gen"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let id: u64 = text.trim().parse().unwrap();
    assert_eq!(id & 1023, 0, "default machine is 0");
}
