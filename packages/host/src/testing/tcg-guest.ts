/**
 * The guest kernel's extra command line in the microVM tests, whose guests run under TCG
 * (software emulation) on these machines (microvmIsolation's `kernelArguments`).
 *
 * `tsc=reliable`: the emulated TSC is QEMU's reading of the host's clock, but a microvm machine has
 * no second clock (HPET, PM timer) to check it against, so without this the kernel keeps its
 * 250 Hz tick on every idle vCPU — about 250 emulated timer interrupts a second per vCPU while a
 * command sleeps or waits, and a small crate's `cargo test` about a tenth more CPU time
 * (issue 39's figures). Tests only: under KVM the guest keeps time with kvm-clock, and a host
 * serving with TCG is the operator's choice, so production's command line stays as it is.
 */
export const TCG_TEST_KERNEL_ARGUMENTS: readonly string[] = ["tsc=reliable"];
