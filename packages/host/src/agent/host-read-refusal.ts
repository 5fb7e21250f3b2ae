/** A read the host cannot answer for a reason the operator's refusal names: nothing to read, or its state moved. */
export class HostReadRefusal extends Error {
  constructor(
    readonly refusal: "not_found" | "conflict",
    message: string,
  ) {
    super(message);
    this.name = "HostReadRefusal";
  }
}
