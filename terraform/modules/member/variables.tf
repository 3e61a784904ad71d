# What differs between the member groups. The root module validates the
# user-facing values (types, counts, sizes); these checks catch a wrong call.

variable "name" {
  description = "Name of the autoscaling group and of its instances (Name tag); the launch template's name starts with it."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,60}$", var.name))
    error_message = "The name must be 1-61 characters of lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "component" {
  description = "Component the instances run (frontend or appserver): their Component tag, which operators target with SSM."
  type        = string

  validation {
    condition     = contains(["frontend", "appserver"], var.component)
    error_message = "The component must be frontend or appserver."
  }
}

variable "description" {
  description = "Description of the launch template."
  type        = string
}

variable "ami_id" {
  description = "AMI the instances boot."
  type        = string
}

variable "root_device_name" {
  description = "Root device name of ami_id, where the encrypted gp3 root volume is attached."
  type        = string
}

variable "instance_type" {
  description = "EC2 instance type of the members."
  type        = string
}

variable "instance_count" {
  description = "Number of members: the group's min, max and desired size."
  type        = number

  validation {
    condition     = var.instance_count >= 1 && floor(var.instance_count) == var.instance_count
    error_message = "The instance_count must be a whole number, at least 1."
  }
}

variable "security_group_ids" {
  description = "Security groups of the members."
  type        = list(string)
}

variable "instance_profile_arn" {
  description = "ARN of the instance profile (the component's IAM role)."
  type        = string
}

variable "user_data" {
  description = "First-boot script, not yet base64-encoded. It must not hold secrets: launch template user data is readable by anyone allowed to describe it."
  type        = string

  validation {
    condition     = startswith(var.user_data, "#!/bin/bash\n")
    error_message = "The user_data must be a bash script (#!/bin/bash)."
  }
}

variable "subnet_ids" {
  description = "Subnets the group spreads its instances over (the private ones)."
  type        = list(string)
}

variable "target_group_arns" {
  description = "Load balancer target groups the members join; empty for members that no balancer reaches."
  type        = list(string)
  default     = []
}

variable "health_check_type" {
  description = "What replaces an instance: EC2 (status checks only) or ELB (also the target group's health check)."
  type        = string
  default     = "EC2"

  validation {
    condition     = contains(["EC2", "ELB"], var.health_check_type)
    error_message = "The health_check_type must be EC2 or ELB."
  }
}

variable "boot_grace_period_seconds" {
  description = "Seconds after launch before health checks count, and the instance refresh's warm-up."
  type        = number
}

variable "root_volume_size_gb" {
  description = "Size of each member's root volume, in GiB."
  type        = number
}

variable "tags" {
  description = "Tags for the instances and volumes the group launches (provider default_tags do not reach them)."
  type        = map(string)
  default     = {}
}

variable "instance_tags" {
  description = "Extra tags for the instances only, e.g. the app an app server runs."
  type        = map(string)
  default     = {}
}
