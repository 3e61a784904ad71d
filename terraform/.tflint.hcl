# tflint configuration. Only the terraform ruleset that is bundled inside the
# tflint binary is used: it needs no download, so linting works offline.
# The AWS ruleset (tflint-ruleset-aws) would need a plugin download from
# GitHub, which CI cannot reach.
config {
  format = "compact"
}

plugin "terraform" {
  enabled = true
  # "all" turns on every rule of the bundled ruleset, including the
  # documentation, typing, naming and standard-module-structure rules.
  preset = "all"
}
